#include "server/http/browser_policy.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

// "example.org:8080" -> "example.org"; "[::1]:8080" -> "::1".
std::string HostName(absl::string_view host) {
  if (absl::StartsWith(host, "[")) {
    const size_t end = host.find(']');
    return std::string(host.substr(1, end == absl::string_view::npos ? host.npos : end - 1));
  }
  return absl::AsciiStrToLower(host.substr(0, host.rfind(':')));
}

bool Listed(const std::vector<std::string>& list, absl::string_view value) {
  return std::any_of(list.begin(), list.end(),
                     [&](const std::string& item) { return absl::EqualsIgnoreCase(item, value); });
}

bool SameOrigin(absl::string_view host, absl::string_view origin) {
  return !host.empty() && (absl::EqualsIgnoreCase(origin, absl::StrCat("http://", host)) ||
                           absl::EqualsIgnoreCase(origin, absl::StrCat("https://", host)));
}

bool CorsAllowed(const BrowserPolicy& policy, absl::string_view origin) {
  return Listed(policy.cors_origins, "*") || Listed(policy.cors_origins, origin);
}

// Quoted for a message, and short: the header is the client's.
std::string Quote(absl::string_view text) {
  std::string out(text.substr(0, 100));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f ||
        c == '"' || c == '\\') {
      c = '?';
    }
  }
  return absl::StrCat("'", out, "'");
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  const std::string name = HostName(host);
  // An address, parsed: a name such as "127.0.0.1.evil.example" is a rebinding's, not ours.
  in_addr v4;
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return name == "localhost" || name == "::1" || absl::EndsWith(name, ".localhost");
}

std::string BrowserRefusal(const BrowserPolicy& policy, absl::string_view host,
                           absl::string_view origin) {
  if (policy.check_host && !host.empty() && !IsLoopbackHost(host) &&
      !Listed(policy.allowed_hosts, HostName(host))) {
    return absl::StrCat("the Host header ", Quote(host),
                        " does not name this server: add it to --allowed_hosts");
  }
  if (!origin.empty() && !SameOrigin(host, origin) && !CorsAllowed(policy, origin)) {
    return absl::StrCat("requests from web pages of another origin (", Quote(origin),
                        ") are refused: add the origin to --cors_origins");
  }
  return "";
}

std::string CorsHeaders(const BrowserPolicy& policy, absl::string_view host,
                        absl::string_view origin) {
  if (origin.empty() || SameOrigin(host, origin) || !CorsAllowed(policy, origin)) return "";
  return absl::StrCat("Access-Control-Allow-Origin: ",
                      Listed(policy.cors_origins, "*") ? std::string("*") : std::string(origin),
                      "\r\nVary: Origin\r\n"
                      "Access-Control-Allow-Headers: Content-Type, Authorization\r\n"
                      "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
                      "Access-Control-Expose-Headers: Content-Disposition\r\n");
}

}  // namespace glossa::server
