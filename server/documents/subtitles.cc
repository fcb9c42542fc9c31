#include "server/documents/subtitles.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace glossa::server {
namespace {

// A line that begins with `word` followed by a blank or nothing.
bool StartsWithWord(absl::string_view line, absl::string_view word) {
  return absl::StartsWith(line, word) && (line.size() == word.size() || IsBlank(line[word.size()]));
}

// WebVTT blocks that hold no cue text.
bool IsWebVttMetadata(absl::string_view first_line) {
  return StartsWithWord(first_line, "NOTE") || StartsWithWord(first_line, "STYLE") ||
         StartsWithWord(first_line, "REGION");
}

// Where the tag that starts at source[i] ends (past its '>' or '}'), or 0 when none starts there.
size_t TagEnd(absl::string_view source, size_t i, size_t line_end, NextChar* angle,
              NextChar* brace) {
  char close;
  if (source[i] == '<' && i + 1 < line_end &&
      (absl::ascii_isalnum(source[i + 1]) || source[i + 1] == '/')) {
    close = '>';
  } else if (source[i] == '{' && i + 1 < line_end && source[i + 1] == '\\') {
    close = '}';
  } else {
    return 0;
  }
  const size_t end = (close == '>' ? angle : brace)->From(i + 2);
  return end == line_end ? 0 : end + 1;
}

// One line of a cue's text: its text pieces, cut at each tag.
void ReadCueLine(absl::string_view source, const Line& line, SegmentBuilder* out) {
  NextChar angle(source, line.end, '>'), brace(source, line.end, '}');
  size_t text_start = line.begin;
  size_t i = line.begin;
  while (i < line.end) {
    const size_t tag_end = TagEnd(source, i, line.end, &angle, &brace);
    if (tag_end == 0) {
      ++i;
      continue;
    }
    out->Text(text_start, i);
    out->Cut();
    i = text_start = tag_end;
  }
  out->Text(text_start, line.end);
}

// The lines [first, last) of one block (no blank line among them).
void ReadBlock(absl::string_view source, const std::vector<Line>& lines, size_t first, size_t last,
               bool webvtt, SegmentBuilder* out) {
  const auto text_of = [&](size_t k) {
    return source.substr(lines[k].begin, lines[k].end - lines[k].begin);
  };
  if (webvtt && IsWebVttMetadata(text_of(first))) return;
  size_t timing = first;
  while (timing < last && !absl::StrContains(text_of(timing), "-->")) ++timing;
  for (size_t k = timing + 1; k < last; ++k) {
    if (k > timing + 1) out->Joint(lines[k - 1].end, lines[k].begin);
    ReadCueLine(source, lines[k], out);
  }
  out->Cut();
}

}  // namespace

void ReadSubtitles(absl::string_view source, size_t from, bool webvtt, SegmentBuilder* out) {
  const std::vector<Line> lines = SplitLines(source, from);
  size_t k = 0;
  if (webvtt && !lines.empty() && absl::StartsWith(source.substr(lines[0].begin), "WEBVTT")) {
    while (k < lines.size() && !IsBlankLine(source, lines[k])) ++k;  // the header block
  }
  while (k < lines.size()) {
    if (IsBlankLine(source, lines[k])) {
      ++k;
      continue;
    }
    size_t last = k;
    while (last < lines.size() && !IsBlankLine(source, lines[last])) ++last;
    ReadBlock(source, lines, k, last, webvtt, out);
    k = last;
  }
}

}  // namespace glossa::server
