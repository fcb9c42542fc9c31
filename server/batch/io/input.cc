#include "server/batch/io/input.h"

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace glossa::batch {

absl::StatusOr<InputSize> ScanInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --input '", path, "'"));
  InputSize size;
  std::vector<char> buffer(1 << 20);
  char last = '\n';
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    for (const char *p = buffer.data(), *end = p + n;
         (p = static_cast<const char*>(std::memchr(p, '\n', end - p))) != nullptr; ++p) {
      ++size.lines;
    }
    size.bytes += n;
    last = buffer[n - 1];
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  if (last != '\n') ++size.lines;  // an unterminated last line
  return size;
}

absl::StatusOr<Shard> ParseShard(absl::string_view text) {
  if (text.empty()) return Shard{};
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  Shard shard;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &shard.index) ||
      !absl::SimpleAtoi(parts[1], &shard.count) || shard.count < 1 || shard.index < 0 ||
      shard.index >= shard.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard '", text, "': use K/N with 0 <= K < N (e.g. 0/3, 1/3, 2/3)"));
  }
  return shard;
}

LineRange ShardLines(const Shard& shard, int64_t total_lines) {
  // Boundaries at floor(k * total / count): sizes differ by at most one line.
  auto boundary = [&](int64_t k) { return k * total_lines / shard.count; };
  return {boundary(shard.index), boundary(shard.index + 1)};
}

absl::Status LineReader::Open(const std::string& path, int64_t offset, int64_t line) {
  in_.open(path, std::ios::binary);
  if (!in_) return absl::NotFoundError(absl::StrCat("cannot read --input '", path, "'"));
  in_.seekg(offset);
  if (!in_)
    return absl::OutOfRangeError(absl::StrCat("cannot seek to byte ", offset, " of '", path, "'"));
  offset_ = offset;
  line_ = line;
  return absl::OkStatus();
}

bool LineReader::Next(std::string* line, bool* had_newline) {
  if (!std::getline(in_, *line)) return false;
  *had_newline = !in_.eof();
  offset_ += static_cast<int64_t>(line->size()) + (*had_newline ? 1 : 0);
  ++line_;
  return true;
}

bool LineReader::SkipTo(int64_t line) {
  std::string skipped;
  bool had_newline;
  while (line_ < line) {
    if (!Next(&skipped, &had_newline)) return false;
  }
  return true;
}

}  // namespace glossa::batch
