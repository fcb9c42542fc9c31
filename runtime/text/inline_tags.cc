#include "text/inline_tags.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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

struct Open {
  std::string name;
  size_t span;
};

}  // namespace

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
      out.text += line[i++];
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

std::string WriteInlineTags(absl::string_view target, const TaggedText& tags,
                            const std::vector<std::optional<TextSpan>>& placed) {
  std::string out;
  size_t pos = 0;
  for (const MarkupEvent& e : MarkupEvents(placed, target.size())) {
    absl::StrAppend(&out, target.substr(pos, e.at - pos));
    pos = e.at;
    out += e.start ? tags.starts[e.span] : tags.ends[e.span];
  }
  absl::StrAppend(&out, target.substr(pos));
  return out;
}

}  // namespace glossa
