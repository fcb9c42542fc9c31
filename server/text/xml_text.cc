#include "server/text/xml_text.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "text/inline_tags.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

constexpr int64_t kMaxXmlTags = 10000;
constexpr size_t kNone = absl::string_view::npos;

enum class Kind { kText, kStart, kEnd, kEmpty, kOther };

struct Token {
  Kind kind;
  size_t begin, end;  // bytes of the XML
  std::string name;   // kStart, kEnd, kEmpty: the element's name
};

bool IsBlank(absl::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

bool IsNameStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (static_cast<unsigned char>(c) & 0x80) != 0;
}

// Past the '>' of the tag that starts at `pos` (quoted attribute values may hold '>').
size_t TagEnd(absl::string_view xml, size_t pos) {
  char quote = 0;
  for (size_t i = pos + 1; i < xml.size(); ++i) {
    const char c = xml[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return i + 1;
    }
  }
  return kNone;
}

size_t EndOf(absl::string_view xml, size_t from, absl::string_view close) {
  const size_t at = xml.find(close, from);
  return at == kNone ? kNone : at + close.size();
}

std::string TagName(absl::string_view tag) {
  const size_t begin = tag.size() > 1 && tag[1] == '/' ? 2 : 1;
  size_t end = begin;
  while (end < tag.size() && !absl::ascii_isspace(static_cast<unsigned char>(tag[end])) &&
         tag[end] != '/' && tag[end] != '>') {
    ++end;
  }
  return std::string(tag.substr(begin, end - begin));
}

// The XML as text, tags, and the rest (comments, sections, declarations); a '<' that starts
// none of them is text.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view xml) {
  std::vector<Token> out;
  int64_t tags = 0;
  size_t text_begin = 0, pos = 0;
  while ((pos = xml.find('<', pos)) != kNone) {
    const absl::string_view rest = xml.substr(pos);
    Kind kind = Kind::kOther;
    size_t end;
    if (absl::StartsWith(rest, "<!--")) {
      end = EndOf(xml, pos + 4, "-->");
    } else if (absl::StartsWith(rest, "<![CDATA[")) {
      end = EndOf(xml, pos + 9, "]]>");
    } else if (absl::StartsWith(rest, "<?")) {
      end = EndOf(xml, pos + 2, "?>");
    } else if (absl::StartsWith(rest, "<!")) {
      end = TagEnd(xml, pos);
    } else if (rest.size() > 1 && (rest[1] == '/' || IsNameStart(rest[1]))) {
      end = TagEnd(xml, pos);
      kind = rest[1] == '/'                        ? Kind::kEnd
             : end != kNone && xml[end - 2] == '/' ? Kind::kEmpty
                                                   : Kind::kStart;
    } else {
      ++pos;  // text
      continue;
    }
    if (end == kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("the XML's '", rest.substr(0, std::min<size_t>(rest.size(), 20)),
                       "' at byte ", pos, " is not closed"));
    }
    if (++tags > kMaxXmlTags) {
      return absl::InvalidArgumentError(
          absl::StrCat("the XML has more than ", kMaxXmlTags, " tags: send it in parts"));
    }
    if (pos > text_begin) out.push_back({Kind::kText, text_begin, pos, ""});
    std::string name = kind == Kind::kOther ? "" : TagName(xml.substr(pos, end - pos));
    out.push_back({kind, pos, end, std::move(name)});
    pos = text_begin = end;
  }
  if (xml.size() > text_begin) out.push_back({Kind::kText, text_begin, xml.size(), ""});
  return out;
}

// Each ignored element, with all it holds, as one kOther token; one never closed runs to the
// end of the XML.
std::vector<Token> CollapseIgnored(std::vector<Token> tokens, size_t size,
                                   const std::set<std::string>& ignore) {
  if (ignore.empty()) return tokens;
  std::vector<Token> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Token& t = tokens[i];
    if ((t.kind != Kind::kStart && t.kind != Kind::kEmpty) || ignore.count(t.name) == 0) {
      out.push_back(std::move(t));
      continue;
    }
    size_t end = t.kind == Kind::kEmpty ? t.end : size;
    int depth = 0;
    for (size_t j = i; t.kind == Kind::kStart && j < tokens.size(); ++j) {
      if (tokens[j].name != t.name) continue;
      depth += tokens[j].kind == Kind::kStart ? 1 : tokens[j].kind == Kind::kEnd ? -1 : 0;
      if (depth == 0) {
        end = tokens[j].end;
        i = j;
        break;
      }
    }
    if (end == size) i = tokens.size();
    out.push_back({Kind::kOther, t.begin, end, ""});
  }
  return out;
}

// Which tags pair up, and which split runs.
struct Structure {
  std::vector<int> match;      // per token: the other tag of its element; -1: none
  std::vector<bool> boundary;  // per token: a tag that ends a run
};

// Marks the element whose start tag is token `start` and every element around it as splitting
// (`root`: the XML itself, around every top-level element).
void MarkSplitting(int start, int root, const std::vector<int>& parent, Structure* s) {
  for (int a = start; a != root && !s->boundary[a]; a = parent[a]) {
    if (s->match[a] < 0) continue;
    s->boundary[a] = true;
    s->boundary[s->match[a]] = true;
  }
}

// What an element (or the XML itself, at index tokens.size()) holds directly.
struct Content {
  std::vector<int> parent;  // per start tag: its element's start tag, or the root
  std::vector<bool> text;   // text that is not blank
  std::vector<bool> space;  // blank text without a line break: spaces between inline elements
  std::vector<bool> child;  // an element, comment or section
};

// Pairs start and end tags (an end tag closes the innermost open element of its name; the
// elements inside it stay unclosed) and notes what each element holds.
Content Pair(const std::vector<Token>& tokens, absl::string_view xml, const XmlTextOptions& options,
             Structure* s, std::vector<int>* splitting_points) {
  const int n = static_cast<int>(tokens.size());
  Content c{std::vector<int>(n + 1, n), std::vector<bool>(n + 1, false),
            std::vector<bool>(n + 1, false), std::vector<bool>(n + 1, false)};
  std::vector<int> stack;
  for (int i = 0; i < n; ++i) {
    const Token& t = tokens[i];
    const int top = stack.empty() ? n : stack.back();
    if (t.kind == Kind::kText) {
      const absl::string_view text = xml.substr(t.begin, t.end - t.begin);
      if (!IsBlank(text)) {
        c.text[top] = true;
      } else if (text.find('\n') == absl::string_view::npos) {
        c.space[top] = true;
      }
      continue;
    }
    if (t.kind != Kind::kEnd) c.child[top] = true;
    if (t.kind == Kind::kStart) {
      c.parent[i] = top;
      stack.push_back(i);
    } else if (t.kind == Kind::kEmpty && options.splitting_tags.count(t.name) > 0) {
      s->boundary[i] = true;
      splitting_points->push_back(top);
    } else if (t.kind == Kind::kEnd) {
      auto it = std::find_if(stack.rbegin(), stack.rend(),
                             [&](int start) { return tokens[start].name == t.name; });
      if (it == stack.rend()) continue;  // no start: kept as an empty element
      const int start = *it;
      stack.erase(std::prev(it.base()), stack.end());
      s->match[start] = i;
      s->match[i] = start;
    }
  }
  return c;
}

// With outline detection, a container is an element (or the XML itself) that holds elements
// and no text of its own, nor spaces between them on one line (inline elements: "<b>a</b>
// <i>b</i>"); each element in a container is a segment of its own. The elements of
// splitting_tags split too; either splits every element around it.
Structure Analyze(const std::vector<Token>& tokens, absl::string_view xml,
                  const XmlTextOptions& options) {
  const int n = static_cast<int>(tokens.size());
  Structure s{std::vector<int>(n, -1), std::vector<bool>(n, false)};
  std::vector<int> splitting_points;  // the elements around empty splitting elements
  const Content c = Pair(tokens, xml, options, &s, &splitting_points);
  auto container = [&](int e) {
    return options.outline_detection && c.child[e] && !c.text[e] && !c.space[e] &&
           (e == n || options.non_splitting_tags.count(tokens[e].name) == 0);
  };
  for (int i = 0; i < n; ++i) {
    if (tokens[i].kind != Kind::kStart || s.match[i] < 0) continue;
    const std::string& name = tokens[i].name;
    const bool segment = container(c.parent[i]) && options.non_splitting_tags.count(name) == 0;
    if (options.splitting_tags.count(name) > 0 || container(i) || segment) {
      MarkSplitting(i, n, c.parent, &s);
    }
  }
  for (int start : splitting_points) MarkSplitting(start, n, c.parent, &s);
  return s;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// The character an entity's name stands for ("amp", decimal "#NNN", hex "#xE9"), as UTF-8.
std::optional<std::string> Entity(absl::string_view name) {
  static constexpr std::pair<absl::string_view, char> kNamed[] = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  for (const auto& [entity, c] : kNamed) {
    if (name == entity) return std::string(1, c);
  }
  uint32_t code = 0;
  const bool hex = absl::StartsWith(name, "#x") || absl::StartsWith(name, "#X");
  const absl::string_view digits = name.substr(std::min<size_t>(name.size(), hex ? 2 : 1));
  if (name.empty() || name[0] != '#' || digits.empty() || !absl::ascii_isxdigit(digits[0]) ||
      !(hex ? absl::SimpleHexAtoi(digits, &code) : absl::SimpleAtoi(digits, &code)) ||
      code == 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return std::nullopt;
  }
  std::string out;
  AppendUtf8(code, &out);
  return out;
}

// Text between tags with its entities decoded; an '&' that starts none is text.
std::string DecodeText(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t semi = text[i] == '&' ? text.find(';', i) : kNone;
    if (semi != kNone && semi - i <= 10) {
      if (auto c = Entity(text.substr(i + 1, semi - i - 1))) {
        out += *c;
        i = semi + 1;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

// Runs of text and inline elements, as HtmlText.
class Runs {
 public:
  Runs(absl::string_view xml, HtmlText* out) : xml_(xml), out_(out) {}

  void Text(const Token& t) {
    Touch(t);
    run_.Text(DecodeText(Bytes(t)));
    pieces_.push_back(t);
  }
  int Open(const Token& t, const Token& end) {
    Touch(t);
    return run_.Open(Bytes(t), Bytes(end));
  }
  void Close(const Token& t, int id) {
    Touch(t);
    run_.Close(id);
  }
  void Point(const Token& t) {
    Touch(t);
    run_.Point(Bytes(t));
  }

  // The run as one text with placeholders, or each of its text pieces alone when it has more
  // elements than a request takes.
  void Flush() {
    if (!empty_ && !IsBlank(run_.plain())) {
      if (run_.elements() <= kMaxInlineTags) {
        Add(run_.text(), {begin_, end_}, run_.markup());
      } else {
        for (const Token& piece : pieces_) {
          if (IsBlank(Bytes(piece))) continue;
          PlaceholderText alone;
          alone.Text(DecodeText(Bytes(piece)));
          Add(alone.text(), {piece.begin, piece.end}, {});
        }
      }
    }
    run_ = PlaceholderText();
    pieces_.clear();
    empty_ = true;
  }

 private:
  std::string Bytes(const Token& t) const {
    return std::string(xml_.substr(t.begin, t.end - t.begin));
  }
  void Touch(const Token& t) {
    if (empty_) begin_ = t.begin;
    empty_ = false;
    end_ = t.end;
  }
  void Add(std::string text, std::pair<size_t, size_t> span, std::vector<Markup> markup) {
    out_->texts.push_back(std::move(text));
    out_->spans.push_back(span);
    out_->markup.push_back(std::move(markup));
  }

  const absl::string_view xml_;
  HtmlText* const out_;
  PlaceholderText run_;
  std::vector<Token> pieces_;  // the run's text tokens
  bool empty_ = true;
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

absl::StatusOr<HtmlText> ExtractXmlText(absl::string_view xml, const XmlTextOptions& options) {
  if (!IsValidUtf8(xml)) return absl::InvalidArgumentError("the XML is not valid UTF-8");
  auto lexed = Lex(xml);
  if (!lexed.ok()) return lexed.status();
  const std::vector<Token> tokens =
      CollapseIgnored(*std::move(lexed), xml.size(), options.ignore_tags);
  const Structure s = Analyze(tokens, xml, options);
  HtmlText out;
  Runs runs(xml, &out);
  std::vector<int> ids(tokens.size(), -1);  // per matched start tag: its placeholder
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    const int match = s.match[i];
    if (s.boundary[i]) {
      runs.Flush();
    } else if (t.kind == Kind::kText) {
      runs.Text(t);
    } else if (t.kind == Kind::kStart && match >= 0) {
      ids[i] = runs.Open(t, tokens[match]);
    } else if (t.kind == Kind::kEnd && match >= 0) {
      runs.Close(t, ids[match]);
    } else {
      runs.Point(t);
    }
  }
  runs.Flush();
  return out;
}

}  // namespace glossa::server
