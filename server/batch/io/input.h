// Reading the input file a line at a time with byte offsets, counting its lines, and the shard
// arithmetic (which lines a shard K/N owns).
#ifndef GLOSSA_SERVER_BATCH_IO_INPUT_H_
#define GLOSSA_SERVER_BATCH_IO_INPUT_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::batch {

// Lines and bytes of a file. A line is ended by '\n'; a last line without one counts too.
struct InputSize {
  int64_t lines = 0;
  int64_t bytes = 0;
};
absl::StatusOr<InputSize> ScanInput(const std::string& path);

// Shard K of N owns a contiguous range of lines, [first, end), 0-based: the ranges of shards
// 0..N-1 follow each other, so their outputs concatenated in shard order are the whole output.
struct Shard {
  int index = 0;
  int count = 1;
};
// "K/N" with 0 <= K < N; "" is 0/1 (the whole file).
absl::StatusOr<Shard> ParseShard(absl::string_view text);
struct LineRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t size() const { return end - first; }
};
LineRange ShardLines(const Shard& shard, int64_t total_lines);

// Reads a file's lines from a byte offset on, remembering where each ends.
class LineReader {
 public:
  // Opens `path` at `offset`, the start of 0-based line `line`.
  absl::Status Open(const std::string& path, int64_t offset, int64_t line);
  // The next line without its '\n' (had_newline tells whether there was one); false at the end.
  bool Next(std::string* line, bool* had_newline);
  // Skips to the start of 0-based line `line` (>= the current one). False when the file is shorter.
  bool SkipTo(int64_t line);
  int64_t line() const { return line_; }      // 0-based number of the next line
  int64_t offset() const { return offset_; }  // byte offset of the next line

 private:
  std::ifstream in_;
  int64_t line_ = 0;
  int64_t offset_ = 0;
};

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_IO_INPUT_H_
