#include "server/documents/markdown.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace glossa::server {
namespace {

// Code spans: each run of backticks closes at the next run of the same length.
class BacktickRuns {
 public:
  BacktickRuns(absl::string_view source, size_t begin, size_t end) {
    for (size_t i = begin; i < end;) {
      size_t j = i;
      while (j < end && source[j] == '`') ++j;
      if (j > i) {
        runs_[j - i].first.push_back(i);
      } else {
        ++j;
      }
      i = j;
    }
  }
  // Where the run of `length` after `at` starts, or npos.
  size_t Closing(size_t at, size_t length) {
    auto& [starts, next] = runs_[length];
    while (next < starts.size() && starts[next] <= at) ++next;
    return next < starts.size() ? starts[next] : std::string::npos;
  }

 private:
  absl::flat_hash_map<size_t, std::pair<std::vector<size_t>, size_t>> runs_;
};

// The inline content of a block (a paragraph's lines, a heading, a table row): its lines' text
// joined with '\n', read as one (a code span or a link may run over a line break), and where
// each line is in the file.
class InlineText {
 public:
  // The next line: the file's bytes [begin, end).
  void AddLine(absl::string_view source, size_t begin, size_t end) {
    if (!lines_.empty()) text_ += '\n';
    starts_.push_back(text_.size());
    lines_.emplace_back(begin, end);
    absl::StrAppend(&text_, source.substr(begin, end - begin));
  }
  const std::string& text() const { return text_; }
  bool empty() const { return lines_.empty(); }
  void Clear() {
    text_.clear();
    starts_.clear();
    lines_.clear();
  }

  // Gives out [begin, end) of text() as the file's pieces, each '\n' as the joint between
  // two lines.
  void Emit(size_t begin, size_t end, SegmentBuilder* out) const {
    if (begin >= end) return;
    size_t k = std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1;
    while (true) {
      const auto [line_begin, line_end] = lines_[k];
      const size_t start = starts_[k], stop = start + (line_end - line_begin);
      if (std::max(begin, start) < std::min(end, stop)) {
        out->Text(line_begin + std::max(begin, start) - start,
                  line_begin + std::min(end, stop) - start);
      }
      if (end <= stop || k + 1 >= lines_.size()) return;
      out->Joint(line_end, lines_[k + 1].first);
      ++k;
    }
  }

 private:
  std::string text_;
  std::vector<size_t> starts_;                    // where each line starts in text_
  std::vector<std::pair<size_t, size_t>> lines_;  // where each line is in the file
};

// Inline content, [begin, end) of an InlineText: text pieces, cut at inline markup.
class InlineScanner {
 public:
  InlineScanner(const InlineText& text, size_t begin, size_t end, SegmentBuilder* out)
      : text_(text),
        s_(text.text()),
        begin_(begin),
        end_(end),
        out_(out),
        close_bracket_(s_, end, ']'),
        close_paren_(s_, end, ')'),
        close_angle_(s_, end, '>') {}
  InlineScanner(const InlineText& text, SegmentBuilder* out)
      : InlineScanner(text, 0, text.text().size(), out) {}

  // `links`: false inside a link's text (links do not nest).
  void Scan(bool links);

 private:
  // Each returns where the markup that starts at i ends, or 0 when none starts there.
  size_t CodeSpanEnd(size_t i);
  size_t TagEnd(size_t i);
  size_t UrlEnd(size_t i);
  // A link or image whose '[' is at i: its end, and where its text ends.
  size_t LinkEnd(size_t i, size_t* text_end);

  void Markup(size_t text_start, size_t at) {
    text_.Emit(text_start, at, out_);
    out_->Cut();
  }

  const InlineText& text_;
  absl::string_view s_;
  size_t begin_, end_;
  SegmentBuilder* out_;
  NextChar close_bracket_, close_paren_, close_angle_;
  std::unique_ptr<BacktickRuns> backticks_;
};

void InlineScanner::Scan(bool links) {
  size_t text_start = begin_;
  size_t i = begin_;
  while (i < end_) {
    const char c = s_[i];
    if (c == '\\' && i + 1 < end_ && absl::ascii_ispunct(s_[i + 1])) {
      i += 2;
      continue;
    }
    size_t markup_end = 0;
    if (c == '`') {
      markup_end = CodeSpanEnd(i);
      if (markup_end == 0) {  // a run that does not open a code span is text
        while (i < end_ && s_[i] == '`') ++i;
        continue;
      }
    } else if (c == '<') {
      markup_end = TagEnd(i);
    } else if (c == 'h') {
      markup_end = UrlEnd(i);
    } else if (links && (c == '[' || (c == '!' && i + 1 < end_ && s_[i + 1] == '['))) {
      const size_t open = c == '!' ? i + 1 : i;
      size_t text_end;
      const size_t link_end = LinkEnd(open, &text_end);
      if (link_end > 0) {  // the link's text is a segment of its own
        Markup(text_start, i);
        InlineScanner(text_, open + 1, text_end, out_).Scan(/*links=*/false);
        out_->Cut();
        i = text_start = link_end;
        continue;
      }
    }
    if (markup_end > 0) {
      Markup(text_start, i);
      i = text_start = markup_end;
    } else {
      ++i;
    }
  }
  text_.Emit(text_start, end_, out_);
}

size_t InlineScanner::CodeSpanEnd(size_t i) {
  size_t run_end = i;
  while (run_end < end_ && s_[run_end] == '`') ++run_end;
  if (backticks_ == nullptr) backticks_ = std::make_unique<BacktickRuns>(s_, begin_, end_);
  const size_t closing = backticks_->Closing(i, run_end - i);
  return closing == std::string::npos ? 0 : closing + (run_end - i);
}

size_t InlineScanner::TagEnd(size_t i) {
  if (i + 1 >= end_) return 0;
  const char next = s_[i + 1];
  if (!absl::ascii_isalpha(next) && next != '/' && next != '!' && next != '?') return 0;
  const size_t close = close_angle_.From(i + 1);
  return close == end_ ? 0 : close + 1;
}

size_t InlineScanner::UrlEnd(size_t i) {
  const absl::string_view rest = s_.substr(i, end_ - i);
  if (!absl::StartsWith(rest, "http://") && !absl::StartsWith(rest, "https://")) return 0;
  if (i > begin_ && absl::ascii_isalnum(s_[i - 1])) return 0;
  size_t end = i;
  while (end < end_ && !IsBlank(s_[end]) && s_[end] != '\n') ++end;
  // Sentence punctuation after a URL belongs to the sentence.
  while (end > i && absl::StrContains(".,;:!?)", s_[end - 1])) --end;
  return end;
}

size_t InlineScanner::LinkEnd(size_t i, size_t* text_end) {
  *text_end = close_bracket_.From(i + 1);
  if (*text_end + 1 >= end_) return 0;
  size_t link_end;
  if (s_[*text_end + 1] == '(') {
    link_end = close_paren_.From(*text_end + 2);
  } else if (s_[*text_end + 1] == '[') {
    link_end = close_bracket_.From(*text_end + 2);
  } else {
    return 0;
  }
  return link_end == end_ ? 0 : link_end + 1;
}

// Columns of indentation at `pos` (a tab to the next multiple of 4), and where it ends.
size_t Indent(absl::string_view s, size_t pos, size_t end, size_t* content) {
  size_t columns = 0;
  while (pos < end && (s[pos] == ' ' || s[pos] == '\t')) {
    columns = s[pos] == '\t' ? (columns / 4 + 1) * 4 : columns + 1;
    ++pos;
  }
  *content = pos;
  return columns;
}

// Past the blockquote markers ("> > ") at the start of a line.
size_t SkipQuoteMarkers(absl::string_view s, const Line& line) {
  size_t pos = line.begin;
  while (true) {
    size_t content;
    if (Indent(s, pos, line.end, &content) > 3 || content >= line.end || s[content] != '>') {
      return pos;
    }
    pos = content + 1;
    if (pos < line.end && s[pos] == ' ') ++pos;
  }
}

// A line of only `c` (at least `min` of them) and blanks; `spaced` allows blanks between them.
bool IsRuleOf(absl::string_view text, char c, size_t min, bool spaced) {
  size_t count = 0;
  size_t i = 0;
  while (i < text.size() && text[i] == c) ++i, ++count;
  for (; i < text.size(); ++i) {
    if (text[i] == c && spaced) {
      ++count;
    } else if (!IsBlank(text[i])) {
      return false;
    }
  }
  return count >= min;
}

bool IsThematicBreak(absl::string_view text) {
  return IsRuleOf(text, '-', 3, true) || IsRuleOf(text, '*', 3, true) ||
         IsRuleOf(text, '_', 3, true);
}

// GitHub's table delimiter row: "| --- | :-: |", "---|---".
bool IsTableDelimiterRow(absl::string_view text) {
  if (!absl::StrContains(text, '|') && !absl::StrContains(text, '-')) return false;
  bool dash = false;
  for (char c : text) {
    if (c == '-') {
      dash = true;
    } else if (c != '|' && c != ':' && !IsBlank(c)) {
      return false;
    }
  }
  return dash && absl::StrContains(text, '|');
}

// A list item's marker at text ("- ", "* ", "+ ", "1. ", "2) "): its length with the spaces
// after it, or 0.
size_t ListMarker(absl::string_view text) {
  size_t i = 0;
  if (!text.empty() && (text[0] == '-' || text[0] == '*' || text[0] == '+')) {
    i = 1;
  } else {
    while (i < text.size() && i < 9 && absl::ascii_isdigit(text[i])) ++i;
    if (i == 0 || i >= text.size() || (text[i] != '.' && text[i] != ')')) return 0;
    ++i;
  }
  if (i < text.size() && !IsBlank(text[i])) return 0;
  while (i < text.size() && IsBlank(text[i])) ++i;
  // A task list item's box.
  if (text.substr(i, 3) == "[ ]" || text.substr(i, 3) == "[x]" || text.substr(i, 3) == "[X]") {
    if (i + 3 == text.size() || IsBlank(text[i + 3])) i += 3;
  }
  return i;
}

bool IsLinkDefinition(absl::string_view text) {
  const size_t close = text.find(']');
  return !text.empty() && text[0] == '[' && close != absl::string_view::npos &&
         close + 1 < text.size() && text[close + 1] == ':';
}

// HTML elements that start an HTML block even inside a paragraph (CommonMark's kind 6).
bool IsBlockTag(absl::string_view name) {
  static constexpr absl::string_view kTags[] = {
      "address", "article", "aside",  "blockquote", "body",    "caption", "center",   "col",
      "details", "dialog",  "dd",     "div",        "dl",      "dt",      "fieldset", "figcaption",
      "figure",  "footer",  "form",   "h1",         "h2",      "h3",      "h4",       "h5",
      "h6",      "head",    "header", "hr",         "html",    "iframe",  "legend",   "li",
      "main",    "nav",     "ol",     "p",          "section", "summary", "table",    "tbody",
      "td",      "tfoot",   "th",     "thead",      "title",   "tr",      "ul"};
  for (absl::string_view tag : kTags) {
    if (name == tag) return true;
  }
  return false;
}

// How an HTML block that starts with `lower` (a line in lower case) ends: at a line holding the
// string returned, or at a blank line when it is empty. None when the line starts no HTML block.
std::optional<std::string> HtmlBlockEnd(absl::string_view lower, bool in_paragraph) {
  if (lower.size() < 2 || lower[0] != '<') return std::nullopt;
  // Comments, processing instructions, CDATA and declarations end where they close.
  static constexpr std::pair<absl::string_view, absl::string_view> kClosed[] = {
      {"<!--", "-->"}, {"<?", "?>"}, {"<![cdata[", "]]>"}};
  for (const auto& [open, close] : kClosed) {
    if (absl::StartsWith(lower, open)) return std::string(close);
  }
  if (lower[1] == '!' && lower.size() > 2 && absl::ascii_isalpha(lower[2])) return ">";
  size_t i = lower[1] == '/' ? 2 : 1;
  const size_t name_begin = i;
  while (i < lower.size() && (absl::ascii_isalnum(lower[i]) || lower[i] == '-')) ++i;
  const absl::string_view name = lower.substr(name_begin, i - name_begin);
  if (name.empty() ||
      (i < lower.size() && !IsBlank(lower[i]) && lower[i] != '>' && lower[i] != '/')) {
    return std::nullopt;
  }
  // Elements whose content is not Markdown end at their closing tag.
  for (absl::string_view raw : {"script", "pre", "style", "textarea"}) {
    if (name == raw && name_begin == 1) return absl::StrCat("</", raw, ">");
  }
  if (IsBlockTag(name)) return "";
  // Any other tag alone on its line, not inside a paragraph (CommonMark's kind 7).
  const absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(lower);
  if (!in_paragraph && absl::EndsWith(trimmed, ">") &&
      trimmed.find('<', 1) == absl::string_view::npos) {
    return "";
  }
  return std::nullopt;
}

// Reads the blocks, line by line.
class MarkdownReader {
 public:
  MarkdownReader(absl::string_view source, size_t from, SegmentBuilder* out)
      : s_(source), lines_(SplitLines(source, from)), out_(out) {}

  void Read() {
    for (size_t k = SkipFrontMatter(); k < lines_.size(); ++k) ReadLine(k);
    EndBlock();
  }

 private:
  absl::string_view TextOf(size_t begin, size_t end) const { return s_.substr(begin, end - begin); }
  size_t SkipFrontMatter() const;
  void ReadLine(size_t k);
  // Each takes the line if it is of its kind.
  bool ContinueFence(size_t pos, const Line& line);
  bool ContinueHtml(size_t pos, const Line& line);
  bool OpenFence(absl::string_view text);
  bool OpenHtml(size_t content, const Line& line);
  bool Heading(size_t content, size_t end);
  bool TableRow(size_t k, size_t content, size_t end);
  void Cells(size_t begin, size_t end);
  void ParagraphLine(size_t content, size_t end);
  void EndBlock() {
    if (!paragraph_text_.empty()) InlineScanner(paragraph_text_, out_).Scan(/*links=*/true);
    paragraph_text_.Clear();
    out_->Cut();
    paragraph_ = table_ = false;
  }
  // A heading or a table cell: one line, [begin, end).
  void LineText(size_t begin, size_t end) {
    InlineText text;
    text.AddLine(s_, begin, end);
    InlineScanner(text, out_).Scan(/*links=*/true);
    out_->Cut();
  }

  absl::string_view s_;
  std::vector<Line> lines_;
  SegmentBuilder* out_;
  char fence_char_ = 0;
  size_t fence_length_ = 0;  // 0: not in a fenced code block
  bool in_html_ = false;
  std::string html_end_;
  bool paragraph_ = false, table_ = false, blank_before_ = false;
  InlineText paragraph_text_;  // the lines of the paragraph read so far
  size_t list_indent_ = 0;     // the columns of a list item's content; 0: not in a list
};

size_t MarkdownReader::SkipFrontMatter() const {
  const auto trimmed = [&](size_t k) {
    size_t b = lines_[k].begin, e = lines_[k].end;
    TrimBlanks(s_, &b, &e);
    return TextOf(b, e);
  };
  if (lines_.empty() || trimmed(0) != "---") return 0;
  for (size_t k = 1; k < lines_.size(); ++k) {
    if (trimmed(k) == "---" || trimmed(k) == "...") return k + 1;
  }
  return 0;
}

void MarkdownReader::ReadLine(size_t k) {
  const Line& line = lines_[k];
  const size_t pos = SkipQuoteMarkers(s_, line);
  if (ContinueFence(pos, line) || ContinueHtml(pos, line)) return;
  if (IsBlankLine(s_, {pos, line.end, line.next})) {
    EndBlock();
    blank_before_ = true;
    return;
  }
  size_t content;
  const size_t columns = Indent(s_, pos, line.end, &content);
  size_t indent = columns;
  if (list_indent_ > 0 && columns >= list_indent_) {
    indent -= list_indent_;
  } else if (list_indent_ > 0 && blank_before_) {
    list_indent_ = 0;  // a line less indented than the item, after a blank line, ends the list
  }
  blank_before_ = false;
  if (!paragraph_ && !table_ && indent >= 4) return;  // indented code
  const absl::string_view text = TextOf(content, line.end);
  if (OpenFence(text) || Heading(content, line.end) || OpenHtml(content, line)) return;
  if ((paragraph_ && (IsRuleOf(text, '=', 1, false) || IsRuleOf(text, '-', 1, false))) ||
      IsThematicBreak(text)) {
    EndBlock();  // a setext heading's underline, or a thematic break
    return;
  }
  if (TableRow(k, content, line.end)) return;
  const size_t marker = ListMarker(text);
  if (marker > 0) {
    EndBlock();
    list_indent_ = columns + marker;
    content += marker;
  } else if (!paragraph_ && IsLinkDefinition(text)) {
    return;
  }
  ParagraphLine(content, line.end);
}

bool MarkdownReader::ContinueFence(size_t pos, const Line& line) {
  if (fence_length_ == 0) return false;
  size_t i = pos;
  while (i < line.end && IsBlank(s_[i])) ++i;
  const absl::string_view text = TextOf(i, line.end);
  if (IsRuleOf(text, fence_char_, fence_length_, false)) fence_length_ = 0;
  return true;
}

bool MarkdownReader::ContinueHtml(size_t pos, const Line& line) {
  if (!in_html_) return false;
  if (html_end_.empty()) {
    in_html_ = !IsBlankLine(s_, {pos, line.end, line.next});
  } else if (absl::StrContains(absl::AsciiStrToLower(TextOf(pos, line.end)), html_end_)) {
    in_html_ = false;
  }
  return true;
}

bool MarkdownReader::OpenFence(absl::string_view text) {
  if (text.empty() || (text[0] != '`' && text[0] != '~')) return false;
  size_t length = 0;
  while (length < text.size() && text[length] == text[0]) ++length;
  if (length < 3) return false;
  // A backtick fence's info string holds no backtick (else the line is a code span).
  if (text[0] == '`' && absl::StrContains(text.substr(length), '`')) return false;
  EndBlock();
  fence_char_ = text[0];
  fence_length_ = length;
  return true;
}

bool MarkdownReader::OpenHtml(size_t content, const Line& line) {
  const std::string lower = absl::AsciiStrToLower(TextOf(content, line.end));
  std::optional<std::string> end = HtmlBlockEnd(lower, paragraph_);
  if (!end.has_value()) return false;
  html_end_ = *std::move(end);
  EndBlock();
  // The block may end on its first line ("<!-- a comment -->").
  in_html_ = html_end_.empty() || !absl::StrContains(absl::string_view(lower).substr(1), html_end_);
  return true;
}

bool MarkdownReader::Heading(size_t content, size_t end) {
  size_t i = content;
  while (i < end && s_[i] == '#') ++i;
  if (i == content || i - content > 6 || (i < end && !IsBlank(s_[i]))) return false;
  EndBlock();
  size_t begin = i;
  TrimBlanks(s_, &begin, &end);
  // A closing sequence of '#' after a blank is not text.
  size_t close = end;
  while (close > begin && s_[close - 1] == '#') --close;
  if (close < end && (close == begin || IsBlank(s_[close - 1]))) {
    end = close;
    TrimBlanks(s_, &begin, &end);
  }
  LineText(begin, end);
  return true;
}

bool MarkdownReader::TableRow(size_t k, size_t content, size_t end) {
  const absl::string_view text = TextOf(content, end);
  if (table_) {
    if (!IsTableDelimiterRow(text)) Cells(content, end);
    return true;
  }
  if (paragraph_ || !absl::StrContains(text, '|') || k + 1 >= lines_.size()) return false;
  const Line& next = lines_[k + 1];
  size_t next_content;
  Indent(s_, SkipQuoteMarkers(s_, next), next.end, &next_content);
  if (!IsTableDelimiterRow(TextOf(next_content, next.end))) return false;
  EndBlock();
  table_ = true;
  Cells(content, end);
  return true;
}

// The cells of a table row, between unescaped pipes.
void MarkdownReader::Cells(size_t begin, size_t end) {
  out_->set_table_cell(true);
  TrimBlanks(s_, &begin, &end);
  if (begin < end && s_[begin] == '|') ++begin;
  if (end > begin && s_[end - 1] == '|' && (end - 1 == begin || s_[end - 2] != '\\')) --end;
  size_t cell = begin;
  for (size_t i = begin; i < end; ++i) {
    if (s_[i] == '\\') {
      ++i;
    } else if (s_[i] == '|') {
      LineText(cell, i);
      cell = i + 1;
    }
  }
  LineText(cell, end);
  out_->set_table_cell(false);
}

void MarkdownReader::ParagraphLine(size_t content, size_t end) {
  paragraph_text_.AddLine(s_, content, end);
  paragraph_ = true;
}

}  // namespace

void ReadMarkdown(absl::string_view source, size_t from, SegmentBuilder* out) {
  MarkdownReader(source, from, out).Read();
}

}  // namespace glossa::server
