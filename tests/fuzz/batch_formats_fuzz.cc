// Fuzzes glossa-batch's line readers and writers (server/batch/io/formats.h). The first input byte
// picks the format and options, the rest is a piece of an input file: it is split into lines at
// '\n' as LineReader does, and each line goes through SplitLineEnding, ParseRecord and, when it
// parses, RenderRecord with a translation that holds tabs and line breaks. Checks: one input line
// gives one output line; TSV keeps the other columns; JSONL output is an object with the
// translation in the output field and the other fields unchanged; text is accepted exactly when it
// is UTF-8 (against a reference validator). ParseFormat and FirstInvalidUtf8 get the bytes too.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fuzz_util.h"
#include "server/batch/io/formats.h"

namespace {

using glossa::batch::Format;
using glossa::batch::FormatOptions;

FormatOptions OptionsFrom(uint8_t b) {
  FormatOptions o;
  o.format = static_cast<Format>((b & 3) % 3);   // bits 0-1: text, tsv, jsonl (3: text)
  o.column = 1 + ((b >> 2) & 3);                 // bits 2-3: 1..4
  o.output_column = (b >> 4) & 3;                // bits 4-5: 0 (the same) .. 3
  if (b & 0x40) o.field = "src";                 // bit 6
  if (b & 0x80) o.output_field = "translation";  // bit 7
  return o;
}

void CheckLine(absl::string_view line, bool had_newline, const FormatOptions& o) {
  const glossa::batch::LineParts parts = glossa::batch::SplitLineEnding(line, had_newline);
  FUZZ_CHECK(std::string(parts.content) + std::string(parts.ending) ==
                 std::string(line) + (had_newline ? "\n" : ""),
             "content + ending is not the line");
  auto record = glossa::batch::ParseRecord(parts.content, o);
  if (!record.ok()) {
    FUZZ_CHECK(record.status().code() == absl::StatusCode::kInvalidArgument &&
                   !record.status().message().empty(),
               "a parse error that is not INVALID_ARGUMENT with a message");
    FUZZ_CHECK(o.format != Format::kText || !glossa::fuzz::ReferenceUtf8Valid(parts.content),
               "valid UTF-8 text refused");
    return;
  }
  FUZZ_CHECK(record->blank == parts.content.empty(), "blank is not 'empty content'");
  FUZZ_CHECK(glossa::fuzz::ReferenceUtf8Valid(record->text), "invalid UTF-8 segment accepted");
  const std::string translation = "a\tb\r\nc\nd\xC3\xA9";
  const std::string out = glossa::batch::RenderRecord(*record, translation, o);
  // No '\n' anywhere; a '\r' only where TSV passes an input column through unchanged (the
  // column checks below).
  FUZZ_CHECK(out.find('\n') == std::string::npos, "an output line holds a line break");
  FUZZ_CHECK(o.format == Format::kTsv || out.find('\r') == std::string::npos,
             "an output line holds a carriage return");
  if (record->blank) {
    FUZZ_CHECK(out.empty(), "a blank line did not stay blank");
    return;
  }
  switch (o.format) {
    case Format::kText:
      FUZZ_CHECK(record->text == parts.content, "text segment differs from the line");
      break;
    case Format::kTsv: {
      const std::vector<std::string> columns = absl::StrSplit(out, '\t');
      const size_t target = o.output_column > 0 ? o.output_column : o.column;
      FUZZ_CHECK(columns.size() == std::max(record->columns.size(), target), "TSV column count");
      for (size_t i = 0; i < columns.size(); ++i) {
        if (i == target - 1) {
          FUZZ_CHECK(columns[i] == "a b  c d\xC3\xA9", "TSV translation column");
        } else if (i < record->columns.size()) {
          FUZZ_CHECK(columns[i] == record->columns[i], "a TSV column changed");
        }
      }
      break;
    }
    case Format::kJsonl: {
      auto object = nlohmann::ordered_json::parse(out, nullptr, /*allow_exceptions=*/false);
      FUZZ_CHECK(object.is_object(), "JSONL output is not an object");
      const std::string& out_field = o.output_field.empty() ? o.field : o.output_field;
      FUZZ_CHECK(object.contains(out_field) && object[out_field] == "a\tb\r\nc\nd\xC3\xA9",
                 "JSONL translation field");
      for (const auto& [key, value] : record->object.items()) {
        // Parsing the output again: floats may not survive the round trip bit for bit, and
        // invalid UTF-8 cannot occur (the parser refused it).
        if (key != out_field && !value.is_number_float()) {
          FUZZ_CHECK(object.contains(key) && object[key] == value, "a JSONL field changed");
        }
      }
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const FormatOptions o = OptionsFrom(data[0]);
  FUZZ_CHECK(glossa::batch::ValidateFormatOptions(o).ok(), "the fuzzer's options are invalid");
  const absl::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  const long bad = glossa::batch::FirstInvalidUtf8(input);
  FUZZ_CHECK((bad < 0) == glossa::fuzz::ReferenceUtf8Valid(input), "FirstInvalidUtf8 is wrong");
  if (bad >= 0) {
    FUZZ_CHECK(static_cast<size_t>(bad) < input.size() &&
                   glossa::fuzz::ReferenceUtf8Valid(input.substr(0, bad)),
               "FirstInvalidUtf8 points past a valid prefix");
  }
  (void)glossa::batch::ParseFormat(input.substr(0, 16), input);

  size_t start = 0;
  while (start < input.size()) {
    const size_t end = input.find('\n', start);
    if (end == absl::string_view::npos) {
      CheckLine(input.substr(start), /*had_newline=*/false, o);
      break;
    }
    CheckLine(input.substr(start, end - start), /*had_newline=*/true, o);
    start = end + 1;
  }
  return 0;
}
