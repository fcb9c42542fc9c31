#include "server/glossaries/glossary_formats.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace glossa::server {
namespace {

constexpr absl::string_view kBom = "\xEF\xBB\xBF";

// Decodes the code point at text[*i] and moves *i past it; false at a malformed sequence.
bool NextCodePoint(absl::string_view text, size_t* i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(*i);
  int length;
  uint32_t min;
  if (lead < 0x80) {
    *cp = lead;
    ++*i;
    return true;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, min = 0x80, *cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, min = 0x800, *cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, min = 0x10000, *cp = lead & 0x07;
  } else {
    return false;
  }
  if (*i + length > text.size()) return false;
  for (int k = 1; k < length; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) return false;
    *cp = (*cp << 6) | (byte(*i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return false;
  *i += length;
  return true;
}

bool IsControl(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
}

std::string CodePointName(uint32_t cp) {
  char name[16];
  std::snprintf(name, sizeof(name), "U+%04X", cp);
  return name;
}

// The entries of a glossary as they are read, pair by pair, with the checks every format shares.
// `where` names the place of each term in errors ("line 3", "entries[2]").
class EntryBuilder {
 public:
  // merge: a source term that comes again adds targets to its entry (TSV, CSV); otherwise it
  // is an error (JSON, messages).
  EntryBuilder(const GlossaryLimits& limits, bool merge) : limits_(limits), merge_(merge) {}

  // Makes `source`'s entry the current one, creating it when the term is new.
  absl::Status Source(absl::string_view source, const std::string& where) {
    if (absl::Status s = CheckTerm(source, "source", where); !s.ok()) return s;
    auto [it, added] = sources_.try_emplace(source, Place{entries_.size(), where});
    if (!added) {
      if (!merge_) {
        return Error(where, "the source term '", source, "' comes again (first at ",
                     it->second.where, "): list all its targets in one entry");
      }
      current_ = it->second.index;
      return absl::OkStatus();
    }
    if (static_cast<int64_t>(entries_.size()) >= limits_.max_entries) {
      return Error(where, "more than ", limits_.max_entries, " entries (the limit of a glossary)");
    }
    if (absl::Status s = AddBytes(source.size(), where); !s.ok()) return s;
    current_ = entries_.size();
    entries_.emplace_back().set_source(std::string(source));
    return absl::OkStatus();
  }

  // Adds `target` to the current entry.
  absl::Status Target(absl::string_view target, const std::string& where) {
    if (absl::Status s = CheckTerm(target, "target", where); !s.ok()) return s;
    v1::GlossaryEntry& entry = entries_[current_];
    const std::string pair = absl::StrCat(entry.source(), absl::string_view("\0", 1), target);
    auto [it, added] = pairs_.try_emplace(pair, where);
    if (!added) {
      return Error(where, "the pair '", entry.source(), "' -> '", target,
                   "' is given twice (first at ", it->second, ")");
    }
    if (entry.targets_size() >= limits_.max_targets) {
      return Error(where, "the source term '", entry.source(), "' has more than ",
                   limits_.max_targets, " target terms (the limit of an entry)");
    }
    if (absl::Status s = AddBytes(target.size(), where); !s.ok()) return s;
    entry.add_targets(std::string(target));
    return absl::OkStatus();
  }

  // The current entry has at least one target.
  absl::Status CheckHasTarget(const std::string& where) const {
    if (entries_.empty() || entries_[current_].targets_size() > 0) return absl::OkStatus();
    return Error(where, "the source term '", entries_[current_].source(), "' has no target term");
  }

  absl::StatusOr<std::vector<v1::GlossaryEntry>> Finish() && {
    if (entries_.empty()) return absl::InvalidArgumentError("the glossary has no entries");
    return std::move(entries_);
  }

 private:
  struct Place {
    size_t index;
    std::string where;
  };

  template <typename... Args>
  static absl::Status Error(absl::string_view where, const Args&... args) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", args...));
  }

  absl::Status CheckTerm(absl::string_view term, absl::string_view which,
                         absl::string_view where) const {
    if (term.empty()) return Error(where, "the ", which, " term is empty");
    if (const std::string problem = TextProblem(term); !problem.empty()) {
      return Error(where, "the ", which, " term ", problem);
    }
    if (term.size() > static_cast<size_t>(limits_.max_term_bytes)) {
      return Error(where, "the ", which, " term is ", term.size(), " bytes; a term is at most ",
                   limits_.max_term_bytes);
    }
    if (absl::ascii_isspace(term.front()) || absl::ascii_isspace(term.back())) {
      return Error(where, "the ", which, " term starts or ends with a space");
    }
    return absl::OkStatus();
  }

  absl::Status AddBytes(size_t bytes, absl::string_view where) {
    bytes_ += static_cast<int64_t>(bytes) + kTermOverheadBytes;
    if (bytes_ <= limits_.max_bytes) return absl::OkStatus();
    return Error(where, "the glossary's terms take more than ", limits_.max_bytes,
                 " bytes in memory (the limit of a glossary; each term counts ",
                 kTermOverheadBytes, " bytes besides its own)");
  }

  const GlossaryLimits limits_;
  const bool merge_;
  std::vector<v1::GlossaryEntry> entries_;
  size_t current_ = 0;
  int64_t bytes_ = 0;
  absl::flat_hash_map<std::string, Place> sources_;
  absl::flat_hash_map<std::string, std::string> pairs_;  // source '\0' target -> where
};

std::string Line(int number) { return absl::StrCat("line ", number); }

absl::StatusOr<std::vector<v1::GlossaryEntry>> ParseTsv(absl::string_view text,
                                                        const GlossaryLimits& limits) {
  EntryBuilder builder(limits, /*merge=*/true);
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    const std::vector<absl::string_view> columns = absl::StrSplit(line, '\t');
    if (columns.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          Line(number), ": ", columns.size(), columns.size() == 1 ? " column" : " columns",
          "; a line is a source term, a tab, and its target term"));
    }
    const std::string where = Line(number);
    if (absl::Status s = builder.Source(absl::StripAsciiWhitespace(columns[0]), where); !s.ok()) {
      return s;
    }
    if (absl::Status s = builder.Target(absl::StripAsciiWhitespace(columns[1]), where); !s.ok()) {
      return s;
    }
  }
  return std::move(builder).Finish();
}

// RFC 4180 records, read one at a time; a quoted field may hold commas, quotes ("") and line
// breaks (a record then spans lines and is named by its first).
class CsvReader {
 public:
  explicit CsvReader(absl::string_view text) : text_(text) {}

  bool Done() const { return i_ >= text_.size(); }
  int line() const { return line_; }

  // The fields of the next record; `start` is told the line it starts on.
  absl::Status Next(std::vector<std::string>* fields, int* start) {
    fields->clear();
    *start = line_;
    for (;;) {
      std::string field;
      if (absl::Status s = Field(&field); !s.ok()) return s;
      fields->push_back(std::move(field));
      if (i_ >= text_.size()) return absl::OkStatus();
      const char c = text_[i_++];  // ',' or '\n'
      if (c == '\n') {
        ++line_;
        return absl::OkStatus();
      }
    }
  }

 private:
  absl::Status Field(std::string* field) {
    size_t start = i_;  // spaces before a quoted field are let pass
    while (start < text_.size() && text_[start] == ' ') ++start;
    const bool quoted = start < text_.size() && text_[start] == '"';
    if (quoted) i_ = start;
    if (!quoted) {
      const size_t end = std::min(text_.find_first_of(",\n", i_), text_.size());
      const absl::string_view raw = text_.substr(i_, end - i_);
      if (absl::StrContains(raw, '"')) {
        return absl::InvalidArgumentError(absl::StrCat(
            Line(line_),
            ": a quote inside an unquoted field (quote the whole field: \"a \"\"b\"\"\")"));
      }
      field->assign(raw.data(), raw.size());
      i_ = end;
      return absl::OkStatus();
    }
    const int first_line = line_;
    for (++i_;; ++i_) {
      if (i_ >= text_.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Line(first_line), ": a quoted field is not closed"));
      }
      const char c = text_[i_];
      if (c == '"' && i_ + 1 < text_.size() && text_[i_ + 1] == '"') {
        field->push_back('"');
        ++i_;
      } else if (c == '"') {
        break;
      } else {
        if (c == '\n') ++line_;
        field->push_back(c);
      }
    }
    ++i_;  // the closing quote; only spaces (and a '\r') may follow before ',' or '\n'
    while (i_ < text_.size() && (text_[i_] == ' ' || text_[i_] == '\r')) ++i_;
    if (i_ < text_.size() && text_[i_] != ',' && text_[i_] != '\n') {
      return absl::InvalidArgumentError(absl::StrCat(Line(line_), ": text after a closing quote"));
    }
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t i_ = 0;
  int line_ = 1;
};

absl::StatusOr<std::vector<v1::GlossaryEntry>> ParseCsv(absl::string_view text,
                                                        const GlossaryLimits& limits) {
  EntryBuilder builder(limits, /*merge=*/true);
  CsvReader reader(text);
  std::vector<std::string> fields;
  while (!reader.Done()) {
    int number;
    if (absl::Status s = reader.Next(&fields, &number); !s.ok()) return s;
    if (fields.size() == 1 && absl::StripAsciiWhitespace(fields[0]).empty()) continue;
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(Line(number), ": ", fields.size(), fields.size() == 1 ? " field" : " fields",
                       "; a record is a source term, a comma, and its target term"));
    }
    const std::string where = Line(number);
    if (absl::Status s = builder.Source(absl::StripAsciiWhitespace(fields[0]), where); !s.ok()) {
      return s;
    }
    if (absl::Status s = builder.Target(absl::StripAsciiWhitespace(fields[1]), where); !s.ok()) {
      return s;
    }
  }
  return std::move(builder).Finish();
}

// The line of each string token of a JSON text, in order: the order in which the parser hands
// over keys and string values. (A JSON string cannot span lines.)
std::vector<int> StringLines(absl::string_view text) {
  std::vector<int> lines;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (text[i] != '"') continue;
    lines.push_back(line);
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\')
        ++i;
      else if (text[i] == '\n')
        ++line;
    }
  }
  return lines;
}

// {"source": "target" | ["target", ...], ...} through nlohmann's SAX interface, which hands
// over every key (repeated ones too) where a parsed object would keep only the last.
class JsonEntries final : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonEntries(absl::string_view text, const GlossaryLimits& limits)
      : lines_(StringLines(text)), builder_(limits, /*merge=*/false) {}

  absl::Status status() const { return status_; }
  EntryBuilder& builder() { return builder_; }

  bool null() override { return NotATarget("null"); }
  bool boolean(bool) override { return NotATarget("true or false"); }
  bool number_integer(number_integer_t) override { return NotATarget("a number"); }
  bool number_unsigned(number_unsigned_t) override { return NotATarget("a number"); }
  bool number_float(number_float_t, const string_t&) override { return NotATarget("a number"); }
  bool binary(binary_t&) override { return NotATarget("binary data"); }
  bool start_object(std::size_t) override {
    if (depth_++ == 0) return true;
    return NotATarget("an object");
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool key(string_t& key) override { return Keep(builder_.Source(key, Where(NextLine()))); }
  bool string(string_t& value) override {
    const int line = NextLine();
    if (depth_ == 0) return Fail(Where(line), "the glossary is not a JSON object");
    return Keep(builder_.Target(value, Where(line)));
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return Fail(Where(1), "the glossary is not a JSON object");
    if (depth_ > 1) return NotATarget("a list of lists");
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return Keep(builder_.CheckHasTarget(Where(key_line_)));
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    if (const size_t end = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && end != std::string::npos) {
      what = what.substr(end + 2);
    }
    status_ = absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", what));
    return false;
  }

 private:
  int NextLine() {
    const int line = next_ < lines_.size() ? lines_[next_] : 0;
    ++next_;
    if (depth_ == 1) key_line_ = line;  // a key (or a value, which fails anyway)
    return line;
  }
  static std::string Where(int line) { return Line(line); }
  bool Keep(absl::Status status) {
    status_ = std::move(status);
    return status_.ok();
  }
  bool Fail(const std::string& where, absl::string_view what) {
    return Keep(absl::InvalidArgumentError(absl::StrCat(where, ": ", what)));
  }
  bool NotATarget(absl::string_view what) {
    if (depth_ == 0) return Fail(Where(1), "the glossary is not a JSON object");
    return Fail(Where(key_line_), absl::StrCat("the targets of a source term are a string or a "
                                               "list of strings, not ",
                                               what));
  }

  const std::vector<int> lines_;
  size_t next_ = 0;
  int depth_ = 0;
  int key_line_ = 1;
  EntryBuilder builder_;
  absl::Status status_;
};

absl::StatusOr<std::vector<v1::GlossaryEntry>> ParseJson(absl::string_view text,
                                                         const GlossaryLimits& limits) {
  JsonEntries entries(text, limits);
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &entries);
  if (!entries.status().ok()) return entries.status();
  if (!parsed) return absl::InvalidArgumentError("invalid JSON");
  return std::move(entries.builder()).Finish();
}

}  // namespace

absl::StatusOr<GlossaryFormat> ParseGlossaryFormat(absl::string_view name) {
  if (absl::EqualsIgnoreCase(name, "tsv")) return GlossaryFormat::kTsv;
  if (absl::EqualsIgnoreCase(name, "csv")) return GlossaryFormat::kCsv;
  if (absl::EqualsIgnoreCase(name, "json")) return GlossaryFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown glossary format '", absl::CHexEscape(name.substr(0, 32)), "': tsv, csv or json"));
}

absl::StatusOr<GlossaryFormat> GlossaryFormatOfPath(absl::string_view path) {
  const size_t dot = path.rfind('.');
  const absl::string_view ext = dot == absl::string_view::npos ? "" : path.substr(dot + 1);
  if (absl::EqualsIgnoreCase(ext, "tab")) return GlossaryFormat::kTsv;
  if (ext.find('/') == absl::string_view::npos) {
    if (auto format = ParseGlossaryFormat(ext); format.ok()) return format;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "': a glossary file is .tsv, .csv or .json"));
}

absl::string_view GlossaryFormatName(GlossaryFormat format) {
  switch (format) {
    case GlossaryFormat::kTsv:
      return "tsv";
    case GlossaryFormat::kCsv:
      return "csv";
    case GlossaryFormat::kJson:
      return "json";
  }
  return "tsv";
}

absl::StatusOr<std::vector<v1::GlossaryEntry>> ParseGlossaryEntries(absl::string_view text,
                                                                    GlossaryFormat format,
                                                                    const GlossaryLimits& limits) {
  if (absl::StartsWith(text, kBom)) text.remove_prefix(kBom.size());
  // Refused before it is parsed (a JSON parser holds many times the text's size meanwhile).
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the text is ", text.size(),
                                                   " bytes; a glossary's is at most ",
                                                   limits.max_bytes));
  }
  switch (format) {
    case GlossaryFormat::kTsv:
      return ParseTsv(text, limits);
    case GlossaryFormat::kCsv:
      return ParseCsv(text, limits);
    case GlossaryFormat::kJson:
      return ParseJson(text, limits);
  }
  return absl::InvalidArgumentError("unknown glossary format");
}

absl::Status ValidateGlossaryEntries(const std::vector<v1::GlossaryEntry>& entries,
                                     const GlossaryLimits& limits) {
  EntryBuilder builder(limits, /*merge=*/false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string where = absl::StrCat("entries[", i, "]");
    if (absl::Status s = builder.Source(entries[i].source(), where); !s.ok()) return s;
    for (int j = 0; j < entries[i].targets_size(); ++j) {
      const std::string target_where = absl::StrCat(where, ".targets[", j, "]");
      if (absl::Status s = builder.Target(entries[i].targets(j), target_where); !s.ok()) return s;
    }
    if (absl::Status s = builder.CheckHasTarget(where); !s.ok()) return s;
  }
  return std::move(builder).Finish().status();
}

int64_t GlossaryHeldBytes(const std::vector<v1::GlossaryEntry>& entries) {
  int64_t bytes = 0;
  for (const v1::GlossaryEntry& entry : entries) {
    bytes += static_cast<int64_t>(entry.source().size()) + kTermOverheadBytes;
    for (const std::string& target : entry.targets()) {
      bytes += static_cast<int64_t>(target.size()) + kTermOverheadBytes;
    }
  }
  return bytes;
}

std::string ToTsv(const std::vector<v1::GlossaryEntry>& entries) {
  std::string tsv;
  for (const v1::GlossaryEntry& entry : entries) {
    for (const std::string& target : entry.targets()) {
      absl::StrAppend(&tsv, entry.source(), "\t", target, "\n");
    }
  }
  return tsv;
}

bool IsUtf8(absl::string_view text) {
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    if (!NextCodePoint(text, &i, &cp)) return false;
  }
  return true;
}

std::string TextProblem(absl::string_view text) {
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    if (!NextCodePoint(text, &i, &cp)) return "is not valid UTF-8";
    if (IsControl(cp)) return absl::StrCat("holds a control character (", CodePointName(cp), ")");
  }
  return "";
}

}  // namespace glossa::server
