// The journal beside a glossa-batch output (OUTPUT.journal): an append-only file of JSON lines
// that lets a killed job continue where it stopped, without translating a line twice.
//
//   {"glossa_batch_journal":1,"job":{...}}          first line: what the job is (input size,
//                                                    format, shard and its lines, model, options)
//   {"resume":{"line":L,"output_offset":O}}         a run that continued from line L (1-based)
//   {"failed":L,"code":"INVALID_ARGUMENT","message":"..."}   line L could not be translated
//   {"written":[A,B],"input_offset":I,"output_offset":O}     checkpoint: lines A..B (1-based,
//                                                    inclusive) are in the output, which is O bytes
//                                                    long; the next input line starts at byte I
//   {"complete":{"lines":N,"failed":F}}             the shard is done
//
// The output is written strictly in input order and fsync'd before each checkpoint, so a
// checkpoint only ever names bytes that are on disk. Resuming truncates the output to the last
// checkpoint's offset and goes on from its next line. "failed" records come with the checkpoint
// that covers their line. A torn last line (a crash mid-append) is ignored.
#ifndef GLOSSA_SERVER_BATCH_IO_JOURNAL_H_
#define GLOSSA_SERVER_BATCH_IO_JOURNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace glossa::batch {

struct FailedLine {
  int64_t line = 0;  // 1-based
  std::string code;  // e.g. "INVALID_ARGUMENT", or "MALFORMED" for a line that could not be parsed
  std::string message;
};

struct Checkpoint {
  int64_t first_line = 0;  // 1-based, inclusive: the lines this checkpoint added
  int64_t last_line = 0;
  int64_t input_offset = 0;
  int64_t output_offset = 0;
};

// What a journal says.
struct JournalState {
  nlohmann::json job;                   // from the first line
  std::vector<Checkpoint> checkpoints;  // in order
  std::vector<FailedLine> failed;       // lines covered by a checkpoint only
  bool complete = false;
  // The last checkpoint's position; with no checkpoint, `resume_line` is 0 and the caller starts
  // from the shard's beginning.
  int64_t resume_line() const { return checkpoints.empty() ? 0 : checkpoints.back().last_line; }
};

// Parses a journal's contents. Errors: not a journal (no header line), a corrupt record that is
// not the last line.
absl::StatusOr<JournalState> ParseJournal(absl::string_view contents);
// Reads and parses a journal file; NOT_FOUND when it does not exist.
absl::StatusOr<JournalState> ReadJournal(const std::string& path);

// The records, one JSON line each (with '\n').
std::string HeaderRecord(const nlohmann::json& job);
std::string ResumeRecord(int64_t line, int64_t output_offset);
std::string FailedRecord(const FailedLine& failed);
std::string CheckpointRecord(const Checkpoint& checkpoint);
std::string CompleteRecord(int64_t lines, int64_t failed);

// Appends records to a journal file and syncs it.
class JournalWriter {
 public:
  JournalWriter() = default;
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  ~JournalWriter();

  // A new journal holding `header` (an existing file is replaced), or an existing one to append to.
  absl::Status Create(const std::string& path, const std::string& header);
  absl::Status OpenForAppend(const std::string& path);
  // Appends records in one write() and fdatasync()s the file.
  absl::Status Append(const std::string& records);

 private:
  std::string path_;
  int fd_ = -1;
};

// The journal of an output file: OUTPUT.journal.
std::string JournalPath(const std::string& output_path);

// Writes all of `data` to fd. Used for the output and the journal.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_IO_JOURNAL_H_
