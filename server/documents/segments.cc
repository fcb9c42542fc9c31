#include "server/documents/segments.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

// A translation to write over several lines: no blanks at its ends, one space between words, so
// that no line it is broken into is empty (an empty line would end a paragraph or a cue).
std::string SqueezeSpaces(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (IsBlank(c)) c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The space of `spaces` (ascending) from index *first on that is nearest to `target`, or -1 when
// none is left; *first moves past what later, larger targets cannot use.
long NearestSpace(const std::vector<size_t>& spaces, size_t target, size_t* first) {
  size_t& s = *first;
  if (s >= spaces.size()) return -1;
  while (s + 1 < spaces.size() && spaces[s + 1] <= target) ++s;
  if (s + 1 < spaces.size() && spaces[s] < target && spaces[s + 1] - target < target - spaces[s]) {
    ++s;
  }
  return static_cast<long>(s++);
}

// A translation without line breaks and, in a table cell, with each '|' escaped (a '|' would end
// the cell, as a backslash at the end would escape the cell's closing '|').
std::string Sanitized(absl::string_view translation, bool table_cell) {
  std::string out;
  out.reserve(translation.size());
  for (size_t i = 0; i < translation.size(); ++i) {
    const char c = translation[i];
    const char next = i + 1 < translation.size() ? translation[i + 1] : '\0';
    if (c == '\r' || c == '\n') {
      out += ' ';
    } else if (table_cell && c == '\\' && next != '\0' && next != '\r' && next != '\n') {
      out += c;
      out += next;  // an escaped character, "\|" among them, stays as it is
      ++i;
    } else if (table_cell && (c == '|' || c == '\\')) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

bool IsBlankText(absl::string_view text) {
  for (char c : text) {
    if (!IsBlank(c) && c != '\n') return false;
  }
  return true;
}

// Text that at the start of a line could be read as Markdown syntax: a list marker, a heading,
// a quote, a setext underline, a table row, a fence, HTML, a link reference definition.
bool StartsMarkdownBlock(absl::string_view line) {
  if (line.empty()) return false;
  if (absl::string_view("-*+#>=|`~<[").find(line[0]) != absl::string_view::npos) return true;
  size_t digits = 0;
  while (digits < line.size() && absl::ascii_isdigit(line[digits])) ++digits;
  return digits > 0 && digits < line.size() && (line[digits] == '.' || line[digits] == ')');
}

}  // namespace

std::vector<Line> SplitLines(absl::string_view source, size_t from) {
  std::vector<Line> lines;
  size_t begin = from;
  while (begin < source.size()) {
    size_t newline = source.find('\n', begin);
    size_t next = newline == absl::string_view::npos ? source.size() : newline + 1;
    size_t end = newline == absl::string_view::npos ? source.size() : newline;
    if (end > begin && source[end - 1] == '\r' && newline != absl::string_view::npos) --end;
    lines.push_back({begin, end, next});
    begin = next;
  }
  return lines;
}

void TrimBlanks(absl::string_view source, size_t* begin, size_t* end) {
  while (*begin < *end && IsBlank(source[*begin])) ++*begin;
  while (*end > *begin && IsBlank(source[*end - 1])) --*end;
}

bool IsBlankLine(absl::string_view source, const Line& line) {
  size_t begin = line.begin, end = line.end;
  TrimBlanks(source, &begin, &end);
  return begin == end;
}

void SegmentBuilder::Text(size_t begin, size_t end) {
  if (begin >= end) return;
  // Items of a segment tile its bytes; a gap means markup the reader skipped.
  if (!items_.empty() && items_.back().end != begin) Cut();
  items_.push_back({begin, end, false});
}

void SegmentBuilder::Joint(size_t begin, size_t end) {
  if (!items_.empty() && items_.back().end != begin) Cut();
  if (items_.empty()) return;  // a joint before any text stays outside the segment
  items_.push_back({begin, end, true});
}

void SegmentBuilder::Cut() {
  std::vector<Item> items = std::move(items_);
  items_.clear();
  // The segment: from the first non-blank byte of text to the last one.
  size_t begin = 0, end = 0;
  bool found = false;
  for (const Item& item : items) {
    if (item.joint) continue;
    size_t b = item.begin, e = item.end;
    TrimBlanks(source_, &b, &e);
    if (b == e) continue;
    if (!found) begin = b;
    end = e;
    found = true;
  }
  if (!found) return;
  if (!HasLetter(source_.substr(begin, end - begin))) return;
  if (static_cast<int64_t>(segments_.size()) >= max_segments_) {
    over_limit_ = true;
    return;
  }
  Segment segment{begin, end, {}, table_cell_};
  std::string text;
  size_t pos = begin;  // the next byte of the segment not yet in `text`
  for (const Item& item : items) {
    if (!item.joint || item.begin < begin || item.end > end) continue;
    // A joint takes in the blanks around it; adjacent joints become one.
    size_t b = item.begin, e = item.end;
    while (b > pos && IsBlank(source_[b - 1])) --b;
    while (e < end && IsBlank(source_[e])) ++e;
    if (!segment.joints.empty() && segment.joints.back().second >= b) {
      segment.joints.back().second = e;
    } else {
      absl::StrAppend(&text, source_.substr(pos, b - pos), " ");
      segment.joints.emplace_back(b, e);
    }
    pos = e;
  }
  absl::StrAppend(&text, source_.substr(pos, end - pos));
  segments_.push_back(std::move(segment));
  texts_.push_back(std::move(text));
}

SegmentedDocument::SegmentedDocument(std::string source, SegmentBuilder&& segments, bool markdown)
    : source_(std::move(source)), segments_(std::move(segments.segments())), markdown_(markdown) {
  texts_ = std::move(segments.texts());
}

absl::StatusOr<std::string> SegmentedDocument::Write(
    const std::vector<std::string>& translations) const {
  if (translations.size() != texts_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the document has ", texts_.size(), " segments, not ", translations.size()));
  }
  std::string out;
  out.reserve(source_.size());
  size_t pos = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& segment = segments_[i];
    absl::StrAppend(&out, absl::string_view(source_).substr(pos, segment.begin - pos));
    const std::string& translation = translations[i];
    if (translation == texts_[i] || IsBlankText(translation)) {
      // An empty translation would leave an empty line, which ends a paragraph or a cue.
      absl::StrAppend(
          &out, absl::string_view(source_).substr(segment.begin, segment.end - segment.begin));
    } else if (translation.find_first_of(segment.table_cell ? "\r\n|\\" : "\r\n") ==
               std::string::npos) {
      WriteSegment(i, translation, &out);
    } else {
      WriteSegment(i, Sanitized(translation, segment.table_cell), &out);
    }
    pos = segment.end;
  }
  absl::StrAppend(&out, absl::string_view(source_).substr(pos));
  return out;
}

void SegmentedDocument::WriteSegment(size_t i, absl::string_view translation,
                                     std::string* out) const {
  const Segment& segment = segments_[i];
  const absl::string_view source(source_);
  if (segment.joints.empty()) {
    // Without its blanks at the ends: leading spaces could make a Markdown line code.
    size_t begin = 0, end = translation.size();
    TrimBlanks(translation, &begin, &end);
    absl::StrAppend(out, translation.substr(begin, end - begin));
    return;
  }
  // Where the source's lines broke, as fractions of the segment's text, mapped onto the
  // translation (a translation as long as the text breaks where the source did).
  const std::string text = SqueezeSpaces(translation);
  const double scale = static_cast<double>(text.size()) / texts_[i].size();
  std::vector<size_t> spaces;  // where a line may break
  for (size_t k = 0; k < text.size(); ++k) {
    if (text[k] == ' ' &&
        !(markdown_ && StartsMarkdownBlock(absl::string_view(text).substr(k + 1)))) {
      spaces.push_back(k);
    }
  }
  size_t line_start = 0, first_space = 0, before = 0, piece_start = segment.begin;
  for (const auto& [b, e] : segment.joints) {
    before += b - piece_start;  // the text before this joint, with a space for each joint
    piece_start = e;
    const long space =
        NearestSpace(spaces, static_cast<size_t>(before * scale + 0.5), &first_space);
    ++before;
    if (space < 0) break;
    const size_t at = spaces[space];
    absl::StrAppend(out, absl::string_view(text).substr(line_start, at - line_start),
                    source.substr(b, e - b));
    line_start = at + 1;
  }
  absl::StrAppend(out, absl::string_view(text).substr(line_start));
}

}  // namespace glossa::server
