#include "server/glossaries/glossary_store.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/glossaries/glossary_file.h"

namespace glossa::server {
namespace {

constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxLanguageBytes = 32;
constexpr size_t kIdBytes = 16;  // 128 random bits, 32 hex digits
constexpr absl::string_view kSuffix = ".json";
constexpr absl::string_view kTmpSuffix = ".json.tmp";
// Fixed width, so that the order of the strings is the order of the times.
constexpr char kTimeFormat[] = "%Y-%m-%d%ET%H:%M:%E6SZ";

// Client text in an error message: escaped and cut.
std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 64;
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kMax)), text.size() > kMax ? "..." : "",
                      "'");
}

absl::StatusOr<std::string> NewId() {
  unsigned char bytes[kIdBytes];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError("no random bytes for a glossary id");
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

bool IsId(absl::string_view id) {
  return id.size() == 2 * kIdBytes && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::Status ValidateName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("name is required");
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is ", name.size(), " bytes; a name is at most ", kMaxNameBytes));
  }
  if (const std::string problem = TextProblem(name); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("name ", problem));
  }
  return absl::OkStatus();
}

absl::Status ValidateLanguage(absl::string_view field, absl::string_view code) {
  if (code.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is required (a model's code such as es or spa_Latn, or ISO 639)"));
  }
  const bool printable =
      std::all_of(code.begin(), code.end(), [](char c) { return c > ' ' && c < 0x7F; });
  if (code.size() > kMaxLanguageBytes || !printable) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", Quote(code), " is not a language code: at most ",
                     kMaxLanguageBytes, " printable ASCII characters without spaces"));
  }
  return absl::OkStatus();
}

// The entries of a CreateGlossaryRequest: its messages or its text, checked.
absl::StatusOr<std::vector<v1::GlossaryEntry>> RequestEntries(
    const v1::CreateGlossaryRequest& request, const GlossaryLimits& limits) {
  const bool has_text = !request.entries_text().empty();
  if (has_text && request.entries_size() > 0) {
    return absl::InvalidArgumentError("give the entries as entries or as entries_text, not both");
  }
  if (!has_text) {
    if (request.entries_size() == 0) {
      return absl::InvalidArgumentError(
          "the glossary has no entries: give entries, or entries_text and entries_format");
    }
    if (!request.entries_format().empty()) {
      return absl::InvalidArgumentError("entries_format goes with entries_text");
    }
    std::vector<v1::GlossaryEntry> entries(request.entries().begin(), request.entries().end());
    if (absl::Status s = ValidateGlossaryEntries(entries, limits); !s.ok()) return s;
    return entries;
  }
  const std::string& format_name =
      request.entries_format().empty() ? "tsv" : request.entries_format();
  absl::StatusOr<GlossaryFormat> format = ParseGlossaryFormat(format_name);
  if (!format.ok())
    return absl::InvalidArgumentError(absl::StrCat("entries_format: ", format.status().message()));
  auto entries = ParseGlossaryEntries(request.entries_text(), *format, limits);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("entries_text (", GlossaryFormatName(*format),
                                                   "): ", entries.status().message()));
  }
  return entries;
}

// What Create checks besides the entries.
absl::Status ValidateDescription(absl::string_view name, absl::string_view source_language,
                                 absl::string_view target_language) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = ValidateLanguage("source_language", source_language); !s.ok()) return s;
  return ValidateLanguage("target_language", target_language);
}

// A glossary read from `file`, checked as Create checks a new one.
absl::StatusOr<Glossary> ReadGlossaryFile(const std::string& file, absl::string_view id,
                                          const GlossaryLimits& limits) {
  absl::StatusOr<std::string> text = ReadWholeFile(file);
  if (!text.ok()) return text.status();
  absl::StatusOr<Glossary> glossary = GlossaryFromJson(*text);
  if (!glossary.ok()) return glossary.status();
  const v1::GlossaryInfo& info = glossary->info;
  if (info.glossary_id() != id) {
    return absl::DataLossError(absl::StrCat("it holds glossary ", Quote(info.glossary_id())));
  }
  absl::Time created;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, info.creation_time(), &created, &error)) {
    return absl::DataLossError(absl::StrCat("creation_time: ", error));
  }
  absl::Status valid =
      ValidateDescription(info.name(), info.source_language(), info.target_language());
  if (valid.ok()) valid = ValidateGlossaryEntries(glossary->entries, limits);
  if (!valid.ok()) return absl::DataLossError(valid.message());
  return glossary;
}

// Create's answer when a glossary of `bytes` does not fit beside the `held` ones.
absl::Status StoreFull(int64_t held, int64_t bytes, int64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the stored glossaries hold ", held, " bytes in memory and this one needs ", bytes,
      " more (each term counts its bytes and ", kTermOverheadBytes, " besides), past the ", limit,
      " bytes the server keeps for them (glossa-server --glossary_store_mb): delete some first"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlossaryStore>> GlossaryStore::Open(const std::string& dir,
                                                                   GlossaryLimits limits) {
  std::unique_ptr<GlossaryStore> store(new GlossaryStore(dir, limits));
  if (dir.empty()) return store;
  if (absl::Status loaded = store->Load(); !loaded.ok()) return loaded;
  return store;
}

absl::Status GlossaryStore::Load() {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error || !fs::is_directory(dir_, error) || access(dir_.c_str(), R_OK | W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("glossary directory '", dir_, "' cannot be created, read or written",
                     error ? absl::StrCat(": ", error.message()) : ""));
  }
  absl::MutexLock lock(&mu_);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    if (absl::EndsWith(name, kTmpSuffix)) {  // a write that a crash interrupted
      std::error_code removed;
      fs::remove(entry.path(), removed);
      std::cerr << "glossary store: removed " << path << ", a write that did not finish\n";
      continue;
    }
    if (!absl::EndsWith(name, kSuffix)) continue;
    const std::string id = name.substr(0, name.size() - kSuffix.size());
    absl::StatusOr<Glossary> glossary =
        IsId(id) ? ReadGlossaryFile(path, id, limits_)
                 : absl::DataLossError("its name is not <glossary id>.json");
    if (!glossary.ok()) {
      std::cerr << "glossary store: warning: skipped " << path << ": "
                << glossary.status().message() << "\n";
      continue;
    }
    absl::Time created;
    absl::ParseTime(absl::RFC3339_full, glossary->info.creation_time(), &created, nullptr);
    last_creation_ = std::max(last_creation_, created);
    held_bytes_ += GlossaryHeldBytes(glossary->entries);
    glossaries_[id] = std::make_shared<const Glossary>(*std::move(glossary));
  }
  if (static_cast<int64_t>(glossaries_.size()) > limits_.max_glossaries) {
    std::cerr << "glossary store: warning: " << dir_ << " holds " << glossaries_.size()
              << " glossaries, more than the " << limits_.max_glossaries
              << " the store keeps: none can be created until some are deleted\n";
  }
  if (held_bytes_ > limits_.max_store_bytes) {
    std::cerr << "glossary store: warning: the glossaries of " << dir_ << " hold " << held_bytes_
              << " bytes in memory, more than the " << limits_.max_store_bytes
              << " the store keeps (--glossary_store_mb): all are loaded, and none can be "
                 "created until enough are deleted\n";
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list glossary directory '", dir_, "': ", error.message()));
  }
  return absl::OkStatus();
}

absl::Time GlossaryStore::NextCreationTime() {
  const absl::Time now = absl::Now();
  last_creation_ = std::max(now, last_creation_ + absl::Microseconds(1));
  return last_creation_;
}

absl::StatusOr<v1::GlossaryInfo> GlossaryStore::Create(const v1::CreateGlossaryRequest& request) {
  if (absl::Status s =
          ValidateDescription(request.name(), request.source_language(), request.target_language());
      !s.ok()) {
    return s;
  }
  auto glossary = std::make_shared<Glossary>();
  absl::StatusOr<std::vector<v1::GlossaryEntry>> entries = RequestEntries(request, limits_);
  if (!entries.ok()) return entries.status();
  glossary->entries = *std::move(entries);
  absl::StatusOr<std::string> id = NewId();
  if (!id.ok()) return id.status();
  v1::GlossaryInfo& info = glossary->info;
  info.set_glossary_id(*id);
  info.set_name(request.name());
  info.set_source_language(request.source_language());
  info.set_target_language(request.target_language());
  info.set_entry_count(static_cast<uint32_t>(glossary->entries.size()));
  const int64_t bytes = GlossaryHeldBytes(glossary->entries);
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int64_t>(glossaries_.size()) + writing_ >= limits_.max_glossaries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server holds ", limits_.max_glossaries,
                       " glossaries, as many as it keeps: delete one first"));
    }
    if (held_bytes_ + bytes > limits_.max_store_bytes) {
      return StoreFull(held_bytes_, bytes, limits_.max_store_bytes);
    }
    ++writing_;
    held_bytes_ += bytes;
    info.set_creation_time(absl::FormatTime(kTimeFormat, NextCreationTime(), absl::UTCTimeZone()));
  }
  absl::Status written = absl::OkStatus();
  if (!dir_.empty()) {
    written = WriteFileAtomically(dir_, absl::StrCat(*id, kSuffix), GlossaryToJson(*glossary));
  }
  absl::MutexLock lock(&mu_);
  --writing_;
  if (!written.ok()) {
    held_bytes_ -= bytes;
    std::cerr << "glossary store: " << written.message() << "\n";
    return absl::InternalError("the glossary could not be stored (the server's log says why)");
  }
  glossaries_[*id] = glossary;
  return info;
}

std::vector<v1::GlossaryInfo> GlossaryStore::List() const {
  std::vector<v1::GlossaryInfo> infos;
  {
    absl::ReaderMutexLock lock(&mu_);
    infos.reserve(glossaries_.size());
    for (const auto& [id, glossary] : glossaries_) infos.push_back(glossary->info);
  }
  std::sort(infos.begin(), infos.end(), [](const v1::GlossaryInfo& a, const v1::GlossaryInfo& b) {
    return std::tie(a.creation_time(), a.glossary_id()) <
           std::tie(b.creation_time(), b.glossary_id());
  });
  return infos;
}

absl::StatusOr<std::shared_ptr<const Glossary>> GlossaryStore::Find(
    absl::string_view glossary_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = glossaries_.find(glossary_id);
  if (it == glossaries_.end()) {
    return absl::NotFoundError(absl::StrCat("no glossary ", Quote(glossary_id)));
  }
  return it->second;
}

absl::Status GlossaryStore::Delete(absl::string_view glossary_id) {
  std::shared_ptr<const Glossary> glossary;
  {
    absl::MutexLock lock(&mu_);
    auto it = glossaries_.find(glossary_id);
    if (it == glossaries_.end()) {
      return absl::NotFoundError(absl::StrCat("no glossary ", Quote(glossary_id)));
    }
    glossary = std::move(it->second);
    glossaries_.erase(it);
  }
  // Its bytes stay counted until its file is gone: a removal that fails puts it back.
  const int64_t bytes = GlossaryHeldBytes(glossary->entries);
  const std::string id(glossary_id);
  absl::Status removed = absl::OkStatus();
  if (!dir_.empty()) removed = RemoveFileDurably(dir_, absl::StrCat(id, kSuffix));
  if (!removed.ok()) std::cerr << "glossary store: " << removed.message() << "\n";
  absl::MutexLock lock(&mu_);
  if (removed.ok()) {
    held_bytes_ -= bytes;
    return absl::OkStatus();
  }
  glossaries_.emplace(id, std::move(glossary));
  return absl::InternalError("the glossary could not be deleted (the server's log says why)");
}

int64_t GlossaryStore::HeldBytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return held_bytes_;
}

}  // namespace glossa::server
