#include "text/inline_tags.h"

#include <cctype>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "text/tokenizer.h"
#include "unicode/utf8.h"

namespace glossa {
namespace {

// The element name of a tag's text ("<a href=x>" -> "a", "</b>" -> "b"), lower case.
std::string TagName(absl::string_view tag) {
  size_t i = 1;
  if (i < tag.size() && tag[i] == '/') ++i;
  size_t j = i;
  while (j < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[j])) || tag[j] == '-' ||
                            tag[j] == ':')) {
    ++j;
  }
  return absl::AsciiStrToLower(tag.substr(i, j - i));
}

bool IsVoid(const std::string& name) {
  return name == "br" || name == "img" || name == "hr" || name == "wbr";
}

// The character an entity at text[i] ('&') stands for, and its length; {"", 0} for none.
std::pair<std::string, size_t> Entity(absl::string_view text, size_t i) {
  static constexpr std::pair<absl::string_view, absl::string_view> kNamed[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}, {"&quot;", "\""}, {"&apos;", "'"}};
  for (const auto& [name, value] : kNamed) {
    if (text.substr(i, name.size()) == name) return {std::string(value), name.size()};
  }
  const size_t semi = text.find(';', i);
  if (semi == absl::string_view::npos || semi - i > 10 || text.substr(i, 2) != "&#") return {"", 0};
  const bool hex = i + 2 < text.size() && (text[i + 2] == 'x' || text[i + 2] == 'X');
  uint32_t code = 0;
  const absl::string_view digits = text.substr(i + (hex ? 3 : 2), semi - i - (hex ? 3 : 2));
  if (digits.empty() || !(hex ? absl::SimpleHexAtoi(digits, &code) : absl::SimpleAtoi(digits, &code)) ||
      code == 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return {"", 0};
  }
  char utf8[U8_MAX_LENGTH];
  int32_t length = 0;
  U8_APPEND_UNSAFE(utf8, length, static_cast<UChar32>(code));
  return {std::string(utf8, length), semi + 1 - i};
}

struct Open {
  std::string name;
  size_t span;
};

}  // namespace

std::string EscapeXmlText(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

TaggedText ParseInlineTags(absl::string_view line) {
  TaggedText out;
  std::vector<Open> open;
  auto start = [&](absl::string_view tag) {
    out.spans.push_back({out.text.size(), out.text.size()});
    out.starts.emplace_back(tag);
    out.ends.emplace_back();
    return out.spans.size() - 1;
  };
  size_t i = 0;
  while (i < line.size()) {
    const size_t close = line.find('>', i);
    const bool is_tag = line[i] == '<' && i + 1 < line.size() && close != absl::string_view::npos &&
                        (std::isalpha(static_cast<unsigned char>(line[i + 1])) || line[i + 1] == '/');
    if (!is_tag) {
      const auto [decoded, length] =
          line[i] == '&' ? Entity(line, i) : std::make_pair(std::string(), size_t{0});
      if (length > 0) {
        out.text += decoded;
        i += length;
      } else {
        out.text += line[i++];
      }
      continue;
    }
    const absl::string_view tag = line.substr(i, close + 1 - i);
    i = close + 1;
    const std::string name = TagName(tag);
    if (tag[1] != '/') {
      const size_t span = start(tag);
      if (!absl::EndsWith(tag, "/>") && !IsVoid(name)) open.push_back({name, span});
      continue;
    }
    size_t k = open.size();
    while (k > 0 && open[k - 1].name != name) --k;
    if (k == 0) {
      start(tag);  // a closing tag without its start: a point
      continue;
    }
    // Elements still open inside it stay points where they started.
    const size_t span = open[k - 1].span;
    out.spans[span].end = out.text.size();
    out.ends[span] = std::string(tag);
    open.resize(k - 1);
  }
  return out;
}

absl::StatusOr<std::vector<TaggedText>> ParseTaggedTexts(const std::vector<std::string>& texts) {
  std::vector<TaggedText> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!IsValidUtf8(texts[i])) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " is not valid UTF-8"));
    }
    out.push_back(ParseInlineTags(texts[i]));
    if (out.back().spans.size() > kMaxInlineTags) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " has ", out.back().spans.size(),
                                                     " inline tags; the limit is ", kMaxInlineTags,
                                                     ": send it in parts"));
    }
  }
  return out;
}

std::string WriteInlineTags(absl::string_view target, const TaggedText& tags,
                            const std::vector<std::optional<TextSpan>>& placed) {
  std::string out;
  size_t pos = 0;
  for (const MarkupEvent& e : MarkupEvents(placed, target.size())) {
    out += EscapeXmlText(target.substr(pos, e.at - pos));
    pos = e.at;
    out += e.start ? tags.starts[e.span] : tags.ends[e.span];
  }
  out += EscapeXmlText(target.substr(pos));
  return out;
}

}  // namespace glossa
