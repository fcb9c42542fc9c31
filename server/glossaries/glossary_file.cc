#include "server/glossaries/glossary_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

constexpr int kFileFormat = 1;
// The store writes only validated UTF-8; should anything else come here, it is replaced (U+FFFD)
// rather than thrown.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int error = errno;
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", dir);
  const bool synced = fsync(fd) == 0;
  absl::Status status = synced ? absl::OkStatus() : Errno("cannot fsync", dir);
  close(fd);
  return status;
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

bool GetString(const nlohmann::json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

absl::StatusOr<v1::GlossaryEntry> EntryFromJson(const nlohmann::json& item) {
  v1::GlossaryEntry entry;
  std::string source;
  auto targets = item.is_object() ? item.find("targets") : item.end();
  if (!item.is_object() || !GetString(item, "source", &source) || targets == item.end() ||
      !targets->is_array()) {
    return absl::DataLossError("an entry is not {\"source\": ..., \"targets\": [...]}");
  }
  entry.set_source(std::move(source));
  for (const nlohmann::json& target : *targets) {
    if (!target.is_string()) return absl::DataLossError("a target term is not a string");
    entry.add_targets(target.get<std::string>());
  }
  return entry;
}

}  // namespace

std::string GlossaryToJson(const Glossary& glossary) {
  const v1::GlossaryInfo& info = glossary.info;
  nlohmann::ordered_json head = {{"format", kFileFormat},
                                 {"glossary_id", info.glossary_id()},
                                 {"name", info.name()},
                                 {"source_language", info.source_language()},
                                 {"target_language", info.target_language()},
                                 {"creation_time", info.creation_time()}};
  // Written by hand around the entries so that each entry is a line of its own.
  std::string json = head.dump(-1, ' ', false, kReplace);
  json.pop_back();  // '}'
  json += ",\"entries\":[";
  for (size_t i = 0; i < glossary.entries.size(); ++i) {
    const v1::GlossaryEntry& entry = glossary.entries[i];
    nlohmann::ordered_json item = {
        {"source", entry.source()},
        {"targets", std::vector<std::string>(entry.targets().begin(), entry.targets().end())}};
    absl::StrAppend(&json, i == 0 ? "\n" : ",\n", item.dump(-1, ' ', false, kReplace));
  }
  json += "\n]}\n";
  return json;
}

absl::StatusOr<Glossary> GlossaryFromJson(absl::string_view text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::DataLossError("not a JSON object");
  }
  auto format = json.find("format");
  if (format == json.end() || *format != kFileFormat) {
    return absl::DataLossError(absl::StrCat("not a glossary file of format ", kFileFormat));
  }
  Glossary glossary;
  v1::GlossaryInfo& info = glossary.info;
  std::string id, name, source, target, created;
  if (!GetString(json, "glossary_id", &id) || !GetString(json, "name", &name) ||
      !GetString(json, "source_language", &source) ||
      !GetString(json, "target_language", &target) || !GetString(json, "creation_time", &created)) {
    return absl::DataLossError("a field of the glossary's description is missing");
  }
  info.set_glossary_id(id);
  info.set_name(name);
  info.set_source_language(source);
  info.set_target_language(target);
  info.set_creation_time(created);
  auto entries = json.find("entries");
  if (entries == json.end() || !entries->is_array()) {
    return absl::DataLossError("\"entries\" is missing");
  }
  for (const nlohmann::json& item : *entries) {
    absl::StatusOr<v1::GlossaryEntry> entry = EntryFromJson(item);
    if (!entry.ok()) return entry.status();
    glossary.entries.push_back(*std::move(entry));
  }
  info.set_entry_count(static_cast<uint32_t>(glossary.entries.size()));
  return glossary;
}

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view contents) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && fsync(fd) != 0) status = Errno("cannot fsync", tmp);
  if (close(fd) != 0 && status.ok()) status = Errno("cannot close", tmp);
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = Errno("cannot rename to", path);
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(dir);
}

absl::Status RemoveFileDurably(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove", path);
  if (absl::Status synced = SyncDirectory(dir); !synced.ok()) {
    std::cerr << "glossary store: warning: " << synced.message() << "\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  std::string data;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = Errno("cannot read", path);
      close(fd);
      return status;
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

}  // namespace glossa::server
