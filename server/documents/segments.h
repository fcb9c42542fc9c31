// What the line-based text formats (plain text, Markdown, SubRip, WebVTT) share: a segment is a
// run of the file's text between two pieces of markup, possibly over several lines, and writing
// a file back puts each segment's translation in place of the segment's bytes.
//
// A segment's source is [begin, end) of the file: pieces of text with joints between them (a
// joint: a line break and what surrounds it, e.g. "\n> " inside a blockquote or "\r\n" between a
// cue's lines). Its text is its pieces with each joint read as one space, so that a sentence that
// wraps is translated whole. Its translation is written back on as many lines as the source had
// (fewer when it has too few spaces), broken at the spaces nearest to where the source's lines
// broke, with the source's joints between the lines. A translation equal to the segment's text
// is written as the source bytes themselves, so an unchanged file comes back byte for byte; so
// is an empty translation (or one of blanks only): an empty line would end a paragraph or a cue.
//
// Inline markup (a tag, a code span, a link's destination) is not inside any segment: it ends
// the segment before it and the text after it starts another. Every byte of markup is kept, at
// the cost of translating a sentence cut by markup in pieces. (The pieces could later be one
// segment carrying the spans of its inline markup; Segment is where those spans would go.)
#ifndef GLOSSA_SERVER_DOCUMENTS_SEGMENTS_H_
#define GLOSSA_SERVER_DOCUMENTS_SEGMENTS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/documents/document.h"

namespace glossa::server {

struct Segment {
  size_t begin = 0, end = 0;  // the segment's bytes in the file
  // The joints between its lines, in order, each [begin, end) in the file.
  std::vector<std::pair<size_t, size_t>> joints;
  // A Markdown table cell: a '|' in its translation is written "\|" (else it would end the cell).
  bool table_cell = false;
};

// Collects segments in file order from the pieces a format's reader finds. Leading and trailing
// whitespace of a segment stays outside it (in the file's bytes around it); so do joints at its
// edges. A segment without a letter (HasLetter) is dropped.
class SegmentBuilder {
 public:
  SegmentBuilder(absl::string_view source, int64_t max_segments)
      : source_(source), max_segments_(max_segments) {}

  // Text of the current segment: source bytes [begin, end), after what was added before.
  void Text(size_t begin, size_t end);
  // A line break inside the current segment: [begin, end) is read as one space.
  void Joint(size_t begin, size_t end);
  // Ends the current segment (markup or the end of a block follows).
  void Cut();
  // Whether the segments from here on are Markdown table cells.
  void set_table_cell(bool table_cell) { table_cell_ = table_cell; }

  // True when more than max_segments segments were found (the ones past it are not kept).
  bool over_limit() const { return over_limit_; }
  std::vector<Segment>& segments() { return segments_; }
  std::vector<std::string>& texts() { return texts_; }

 private:
  struct Item {
    size_t begin, end;
    bool joint;
  };
  absl::string_view source_;
  int64_t max_segments_;
  bool over_limit_ = false;
  bool table_cell_ = false;
  std::vector<Item> items_;  // of the current segment
  std::vector<Segment> segments_;
  std::vector<std::string> texts_;
};

// A file of a line-based format with its segments. Write replaces line breaks ("\r", "\n") in a
// translation with spaces: a line break would change the file's structure (end a paragraph, a
// cue). So no line of the file becomes blank and none is added; a translation with fewer spaces
// than the segment has joints takes fewer lines.
class SegmentedDocument : public Document {
 public:
  // `markdown`: no line of a translation written over several lines starts with what Markdown
  // would read as syntax ("- ", "1. ", "#", ">", ...).
  SegmentedDocument(std::string source, SegmentBuilder&& segments, bool markdown);
  absl::StatusOr<std::string> Write(const std::vector<std::string>& translations) const override;

 private:
  void WriteSegment(size_t i, absl::string_view translation, std::string* out) const;

  std::string source_;
  std::vector<Segment> segments_;
  bool markdown_;
};

constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Whether a text has anything to translate: an ASCII letter or any other script's character
// (a byte past ASCII). Text of digits, punctuation and blanks only ("1.", ", ", "--") is not a
// segment: it stays as it is, and a model is not asked to make something of it.
inline bool HasLetter(absl::string_view text) {
  for (char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80) {
      return true;
    }
  }
  return false;
}

// Space, tab, carriage return, form feed, vertical tab.
inline bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// The next `c` before `end` at or after a position. Asked for positions in increasing order, it
// reads each byte once: a line of many '[' and no ']' is read in linear time, not quadratic.
class NextChar {
 public:
  NextChar(absl::string_view source, size_t end, char c) : source_(source), end_(end), c_(c) {}
  // The first `c` in [i, end), or end.
  size_t From(size_t i) {
    if (found_ == kUnknown || (found_ < i && found_ != end_)) {
      found_ = std::min(source_.substr(0, end_).find(c_, i), end_);
    }
    return found_;
  }

 private:
  static constexpr size_t kUnknown = ~size_t{0};
  absl::string_view source_;
  size_t end_;
  char c_;
  size_t found_ = kUnknown;
};

// The lines of a file: [begin, end) without the line break; `next` is where the next one starts.
struct Line {
  size_t begin, end, next;
};
std::vector<Line> SplitLines(absl::string_view source, size_t from);

// [*begin, *end) with the blanks at both ends left out.
void TrimBlanks(absl::string_view source, size_t* begin, size_t* end);
bool IsBlankLine(absl::string_view source, const Line& line);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DOCUMENTS_SEGMENTS_H_
