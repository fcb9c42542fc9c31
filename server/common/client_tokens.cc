#include "server/common/client_tokens.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

// A line that names a client: its number (1-based) and its fields.
struct Entry {
  int line = 0;
  std::vector<absl::string_view> fields;
};

// The lines that are neither blank nor comments, split at spaces and tabs.
std::vector<Entry> Entries(absl::string_view text) {
  std::vector<Entry> entries;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    entries.push_back({number, absl::StrSplit(line, absl::ByAnyChar(" \t\r\f\v"),
                                              absl::SkipEmpty())});
  }
  return entries;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxClientNameBytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

bool ValidToken(absl::string_view token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return !token.empty();
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// Whether `presented` equals `secret`, in time that depends on presented.size() only: every
// byte is compared, and a length that differs adds to the difference rather than returning.
bool SameSecret(absl::string_view presented, absl::string_view secret) {
  const size_t n = secret.size();
  unsigned char diff = presented.size() == n ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    const unsigned char s = n == 0 ? 0 : static_cast<unsigned char>(secret[i < n ? i : 0]);
    diff |= static_cast<unsigned char>(presented[i]) ^ s;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<ClientTokens> ClientTokens::Parse(absl::string_view text) {
  const std::vector<Entry> entries = Entries(text);
  if (entries.empty()) {
    return absl::InvalidArgumentError(
        "holds no token (only blank or comment lines); write one into it "
        "(openssl rand -hex 32 > FILE), or lines 'NAME TOKEN', one per client");
  }
  ClientTokens clients;
  if (entries.size() == 1 && entries[0].fields.size() == 1) {  // one bare token
    GLOSSA_RETURN_IF_ERROR(clients.Add(entries[0].line, kDefaultClient, entries[0].fields[0]));
    return clients;
  }
  for (const Entry& entry : entries) {
    if (entry.fields.size() != 2) {
      return LineError(entry.line,
                       absl::StrCat("expected 'NAME TOKEN', found ", entry.fields.size(),
                                    " fields (a file of several lines names one client on each)"));
    }
    GLOSSA_RETURN_IF_ERROR(clients.Add(entry.line, entry.fields[0], entry.fields[1]));
  }
  return clients;
}

absl::Status ClientTokens::Add(int line, absl::string_view name, absl::string_view token) {
  if (!ValidName(name) || name == kAnonymousClient) {
    return LineError(line, absl::StrCat("a client's name is 1 to ", kMaxClientNameBytes,
                                        " letters, digits, '.', '_' or '-', and not '",
                                        kAnonymousClient, "'"));
  }
  if (!ValidToken(token)) {
    return LineError(line, "a token is visible ASCII (no spaces, no control characters)");
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (names_[i] == name) {
      return LineError(line, absl::StrCat("the client's name is that of line ", lines_[i]));
    }
    if (tokens_[i] == token) {
      return LineError(line, absl::StrCat("the token is that of line ", lines_[i],
                                          ": each client needs a token of its own"));
    }
  }
  if (size() == kMaxClients) {
    return LineError(line, absl::StrCat("more than ", kMaxClients, " clients"));
  }
  names_.emplace_back(name);
  tokens_.emplace_back(token);
  lines_.push_back(line);
  return absl::OkStatus();
}

int ClientTokens::Find(absl::string_view presented) const {
  int found = 0;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const int id = static_cast<int>(i) + 1;
    const bool same = SameSecret(presented, tokens_[i]);
    found = same ? id : found;
  }
  return found;
}

absl::string_view ClientTokens::name(int id) const {
  if (id <= 0 || id > size()) return kAnonymousClient;
  return names_[id - 1];
}

std::vector<std::string> ClientTokens::names() const {
  std::vector<std::string> out = {std::string(kAnonymousClient)};
  out.insert(out.end(), names_.begin(), names_.end());
  return out;
}

}  // namespace glossa::server
