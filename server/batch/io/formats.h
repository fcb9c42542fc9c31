// The line formats glossa-batch reads and writes: plain text (a segment per line), TSV (the
// segment in one column) and JSONL (the segment in one string field of an object per line).
//
// Every function here is pure: a line in, a parsed record or an error out, so the readers can be
// unit-tested and fuzzed without files. A "line" is the input between two '\n' bytes; its line
// ending ("\n", "\r\n", or nothing on an unterminated last line) is split off first and written
// back unchanged after the output line.
#ifndef GLOSSA_SERVER_BATCH_IO_FORMATS_H_
#define GLOSSA_SERVER_BATCH_IO_FORMATS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace glossa::batch {

enum class Format { kText, kTsv, kJsonl };

struct FormatOptions {
  Format format = Format::kText;
  int column = 1;              // TSV: 1-based column holding the segment (as in `cut -f`)
  int output_column = 0;       // TSV: 1-based column receiving the translation; 0 = `column`
  std::string field = "text";  // JSONL: the string field holding the segment
  std::string output_field;    // JSONL: the field receiving the translation; "" = `field`
};

// "text", "tsv" or "jsonl"; "auto" (or "") picks by the input file's extension: .tsv, .jsonl or
// .ndjson, anything else is text.
absl::StatusOr<Format> ParseFormat(absl::string_view name, absl::string_view input_path);
absl::string_view FormatName(Format format);
// Checks the options for `format` (columns >= 1, field names not empty).
absl::Status ValidateFormatOptions(const FormatOptions& options);

// A line without its '\n', split into content and line ending: a trailing '\r' belongs to the
// ending, so "a\r" + had_newline gives {"a", "\r\n"}.
struct LineParts {
  absl::string_view content;
  absl::string_view ending;  // "\r\n", "\n", "\r" or ""
};
LineParts SplitLineEnding(absl::string_view line_without_newline, bool had_newline);

// One parsed line. `blank` lines (empty content, in any format) pass through as empty lines.
struct Record {
  bool blank = false;
  std::string text;                  // the segment to translate
  std::vector<std::string> columns;  // TSV: every column of the line
  nlohmann::ordered_json object;     // JSONL: the whole object, key order kept
};

// Parses a line's content. Errors (INVALID_ARGUMENT) say what is wrong: a TSV line without the
// column, invalid JSON, JSON that is not an object, a missing or non-string field, a segment that
// is not valid UTF-8.
absl::StatusOr<Record> ParseRecord(absl::string_view content, const FormatOptions& options);

// The output line (without ending) for a parsed record and its translation. Line breaks and (for
// TSV) tabs in the translation become spaces, so one input line always gives one output line.
// JSONL is re-serialized compactly: other fields keep their values and order.
std::string RenderRecord(const Record& record, absl::string_view translation,
                         const FormatOptions& options);

// The offset of the first invalid UTF-8 byte in `text`, or -1 when it is valid.
long FirstInvalidUtf8(absl::string_view text);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_IO_FORMATS_H_
