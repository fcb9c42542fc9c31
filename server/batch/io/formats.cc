#include "server/batch/io/formats.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace glossa::batch {
namespace {

// Deeper JSONL lines are refused: nlohmann's copy and dump recurse once per level, and a line of
// 50,000 nested arrays (100 KB) overflowed the stack in RenderRecord under ASan, 10 million (20 MB)
// in a release build (found with the fuzz target and a hand-made input: libFuzzer's inputs stay
// under 4 KB).
constexpr int kMaxJsonDepth = 1000;

// The translation with every byte of `breakers` replaced by a space.
std::string OneLine(absl::string_view translation, absl::string_view breakers) {
  std::string out(translation);
  for (char& c : out) {
    if (breakers.find(c) != absl::string_view::npos) c = ' ';
  }
  return out;
}

absl::Status CheckUtf8(absl::string_view text) {
  const long bad = FirstInvalidUtf8(text);
  if (bad < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the segment is not valid UTF-8 (byte ", bad + 1, ")"));
}

absl::StatusOr<Record> ParseTsv(absl::string_view content, const FormatOptions& options) {
  Record record;
  record.columns = absl::StrSplit(content, '\t');
  const int have = static_cast<int>(record.columns.size());
  if (have < options.column) {
    return absl::InvalidArgumentError(absl::StrCat("the line has ", have, " TSV column",
                                                   have == 1 ? "" : "s", "; --column ",
                                                   options.column, " needs ", options.column));
  }
  record.text = record.columns[options.column - 1];
  if (absl::Status s = CheckUtf8(record.text); !s.ok()) return s;
  return record;
}

absl::StatusOr<Record> ParseJsonl(absl::string_view content, const FormatOptions& options) {
  Record record;
  bool too_deep = false;
  record.object = nlohmann::ordered_json::parse(
      content,
      [&too_deep](int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json&) {
        using Event = nlohmann::ordered_json::parse_event_t;
        // depth: 0 for the outermost value, so the container started here is at depth + 1
        if ((event == Event::object_start || event == Event::array_start) &&
            depth >= kMaxJsonDepth) {
          too_deep = true;
        }
        return !too_deep;  // discards the rest: nothing deeper is built
      },
      /*allow_exceptions=*/false);
  if (too_deep) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the line nests JSON arrays and objects more than ", kMaxJsonDepth, " levels deep"));
  }
  if (record.object.is_discarded()) {
    return absl::InvalidArgumentError("the line is not valid JSON");
  }
  if (!record.object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the line is JSON ", record.object.type_name(), ", not an object"));
  }
  const auto field = record.object.find(options.field);
  if (field == record.object.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the object has no field \"", options.field, "\" (choose it with --field)"));
  }
  if (!field->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"", options.field, "\" is a ", field->type_name(), ", not a string"));
  }
  record.text = field->get<std::string>();
  return record;
}

}  // namespace

absl::StatusOr<Format> ParseFormat(absl::string_view name, absl::string_view input_path) {
  if (name == "text") return Format::kText;
  if (name == "tsv") return Format::kTsv;
  if (name == "jsonl") return Format::kJsonl;
  if (name != "auto" && !name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", name, "': use text, tsv, jsonl or auto"));
  }
  if (absl::EndsWith(input_path, ".tsv")) return Format::kTsv;
  if (absl::EndsWith(input_path, ".jsonl") || absl::EndsWith(input_path, ".ndjson")) {
    return Format::kJsonl;
  }
  return Format::kText;
}

absl::string_view FormatName(Format format) {
  switch (format) {
    case Format::kText:
      return "text";
    case Format::kTsv:
      return "tsv";
    case Format::kJsonl:
      return "jsonl";
  }
  return "?";
}

absl::Status ValidateFormatOptions(const FormatOptions& options) {
  if (options.format == Format::kTsv && (options.column < 1 || options.output_column < 0)) {
    return absl::InvalidArgumentError(
        "--column must be 1 or more and --output_column 0 (the same) or more (columns count "
        "from 1, as in cut -f)");
  }
  if (options.format == Format::kJsonl && options.field.empty()) {
    return absl::InvalidArgumentError("--field must name the JSON field holding the text");
  }
  return absl::OkStatus();
}

LineParts SplitLineEnding(absl::string_view line, bool had_newline) {
  const bool cr = !line.empty() && line.back() == '\r';
  if (cr) line.remove_suffix(1);
  if (had_newline) return {line, cr ? "\r\n" : "\n"};
  return {line, cr ? "\r" : ""};
}

absl::StatusOr<Record> ParseRecord(absl::string_view content, const FormatOptions& options) {
  if (content.empty()) {
    Record blank;
    blank.blank = true;
    return blank;
  }
  switch (options.format) {
    case Format::kTsv:
      return ParseTsv(content, options);
    case Format::kJsonl:
      return ParseJsonl(content, options);
    case Format::kText:
      break;
  }
  if (absl::Status s = CheckUtf8(content); !s.ok()) return s;
  Record record;
  record.text = std::string(content);
  return record;
}

std::string RenderRecord(const Record& record, absl::string_view translation,
                         const FormatOptions& options) {
  if (record.blank) return "";
  switch (options.format) {
    case Format::kText:
      return OneLine(translation, "\r\n");
    case Format::kTsv: {
      std::vector<std::string> columns = record.columns;
      const int target = options.output_column > 0 ? options.output_column : options.column;
      if (static_cast<int>(columns.size()) < target) columns.resize(target);
      columns[target - 1] = OneLine(translation, "\t\r\n");
      return absl::StrJoin(columns, "\t");
    }
    case Format::kJsonl: {
      nlohmann::ordered_json object = record.object;
      object[options.output_field.empty() ? options.field : options.output_field] =
          std::string(translation);
      return object.dump(-1, ' ', /*ensure_ascii=*/false,
                         nlohmann::ordered_json::error_handler_t::replace);
    }
  }
  return "";
}

long FirstInvalidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return static_cast<long>(i);
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return static_cast<long>(i);
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return static_cast<long>(i);
    }
    i += len;
  }
  return -1;
}

}  // namespace glossa::batch
