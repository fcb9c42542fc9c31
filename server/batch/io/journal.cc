#include "server/batch/io/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace glossa::batch {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;  // records keep their keys in the order written

std::string Line(const ordered_json& record) {
  return record.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Applies one parsed record to the state. `pending` holds failures not yet covered by a
// checkpoint.
// Throws json::exception on a record with missing or mistyped members.
void Apply(const json& record, JournalState* state, std::vector<FailedLine>* pending) {
  if (record.contains("written")) {
    const json& w = record.at("written");
    Checkpoint c{w.at(0).get<int64_t>(), w.at(1).get<int64_t>(),
                 record.at("input_offset").get<int64_t>(),
                 record.at("output_offset").get<int64_t>()};
    for (FailedLine& f : *pending) {
      if (f.line <= c.last_line) state->failed.push_back(std::move(f));
    }
    pending->clear();
    state->checkpoints.push_back(c);
  } else if (record.contains("failed")) {
    pending->push_back({record.at("failed").get<int64_t>(), record.value("code", ""),
                        record.value("message", "")});
  } else if (record.contains("resume")) {
    pending->clear();  // failures a killed run never checkpointed
  } else if (record.contains("complete")) {
    state->complete = true;
  }
}

}  // namespace

absl::StatusOr<JournalState> ParseJournal(absl::string_view contents) {
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  lines.pop_back();  // "" after the last '\n', or a torn last line
  if (lines.empty()) return absl::DataLossError("the journal is empty");
  const json header = json::parse(lines[0], nullptr, false);
  if (header.is_discarded() || !header.is_object() || !header.contains("glossa_batch_journal") ||
      !header.contains("job")) {
    return absl::DataLossError("not a glossa-batch journal (its first line is no journal header)");
  }
  JournalState state;
  state.job = header["job"];
  std::vector<FailedLine> pending;
  for (size_t i = 1; i < lines.size(); ++i) {
    const json record = json::parse(lines[i], nullptr, false);
    const bool last = i + 1 == lines.size();
    if (record.is_discarded() || !record.is_object()) {
      if (last) break;  // torn by a crash
      return absl::DataLossError(absl::StrCat("journal line ", i + 1, " is not a JSON object"));
    }
    try {
      Apply(record, &state, &pending);
    } catch (const json::exception& e) {
      return absl::DataLossError(absl::StrCat("journal line ", i + 1, ": ", e.what()));
    }
  }
  return state;
}

absl::StatusOr<JournalState> ReadJournal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no journal '", path, "'"));
  std::stringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<JournalState> state = ParseJournal(contents.str());
  if (!state.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", state.status().message()));
  }
  return state;
}

std::string HeaderRecord(const json& job) {
  return absl::StrCat("{\"glossa_batch_journal\":1,\"job\":",
                      job.dump(-1, ' ', false, json::error_handler_t::replace), "}\n");
}

std::string ResumeRecord(int64_t line, int64_t output_offset) {
  return Line({{"resume", {{"line", line}, {"output_offset", output_offset}}}});
}

std::string FailedRecord(const FailedLine& failed) {
  return Line({{"failed", failed.line}, {"code", failed.code}, {"message", failed.message}});
}

std::string CheckpointRecord(const Checkpoint& c) {
  return Line({{"written", {c.first_line, c.last_line}},
               {"input_offset", c.input_offset},
               {"output_offset", c.output_offset}});
}

std::string CompleteRecord(int64_t lines, int64_t failed) {
  return Line({{"complete", {{"lines", lines}, {"failed", failed}}}});
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) close(fd_);
}

absl::Status JournalWriter::Create(const std::string& path, const std::string& header) {
  // Written beside and renamed over: a crash leaves the old journal or the new one, never half.
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  absl::Status written = WriteAll(fd, header, tmp);
  if (written.ok() && fdatasync(fd) != 0) written = Errno("cannot sync", tmp);
  close(fd);
  if (!written.ok()) return written;
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path);
  return OpenForAppend(path);
}

absl::Status JournalWriter::OpenForAppend(const std::string& path) {
  path_ = path;
  fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) return Errno("cannot open", path);
  return absl::OkStatus();
}

absl::Status JournalWriter::Append(const std::string& records) {
  if (absl::Status s = WriteAll(fd_, records, path_); !s.ok()) return s;
  if (fdatasync(fd_) != 0) return Errno("cannot sync", path_);
  return absl::OkStatus();
}

std::string JournalPath(const std::string& output_path) { return output_path + ".journal"; }

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace glossa::batch
