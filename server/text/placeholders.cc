#include "server/text/placeholders.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "text/inline_tags.h"

namespace glossa::server {
namespace {

// XML's five entities decoded; any other '&' is text.
std::string Unescape(absl::string_view text) {
  static constexpr std::pair<absl::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    bool decoded = false;
    if (text[i] == '&') {
      for (const auto& [name, c] : kEntities) {
        if (text.substr(i, name.size()) == name) {
          out.push_back(c);
          i += name.size() - 1;
          decoded = true;
          break;
        }
      }
    }
    if (!decoded) out.push_back(text[i]);
  }
  return out;
}

// A placeholder tag's kind and index: "<g3>", "</g3>", "<x3/>"; false for any other tag.
bool ParseTag(absl::string_view tag, PlaceholderEvent::Kind* kind, int* id) {
  if (tag.size() < 4 || tag.front() != '<' || tag.back() != '>') return false;
  tag = tag.substr(1, tag.size() - 2);
  if (tag.front() == '/') {
    *kind = PlaceholderEvent::kClose;
    tag.remove_prefix(1);
    if (tag.empty() || tag.front() != 'g') return false;
  } else if (tag.front() == 'x' && tag.back() == '/') {
    *kind = PlaceholderEvent::kPoint;
    tag.remove_suffix(1);
  } else if (tag.front() == 'g') {
    *kind = PlaceholderEvent::kOpen;
  } else {
    return false;
  }
  tag.remove_prefix(1);
  return !tag.empty() && tag.front() != '+' && absl::SimpleAtoi(tag, id) && *id >= 0;
}

void AddText(std::string text, std::vector<PlaceholderEvent>* out) {
  if (text.empty()) return;
  if (!out->empty() && out->back().kind == PlaceholderEvent::kText) {
    out->back().text += text;
  } else {
    out->push_back({PlaceholderEvent::kText, -1, std::move(text)});
  }
}

}  // namespace

void PlaceholderText::Text(absl::string_view plain) {
  text_ += EscapeXmlText(plain);
  absl::StrAppend(&plain_, plain);
}

int PlaceholderText::Open(std::string start, std::string end) {
  const int id = static_cast<int>(markup_.size());
  markup_.push_back({std::move(start), std::move(end), false});
  absl::StrAppend(&text_, "<g", id, ">");
  return id;
}

void PlaceholderText::Close(int id) { absl::StrAppend(&text_, "</g", id, ">"); }

void PlaceholderText::Point(std::string bytes) {
  const int id = static_cast<int>(markup_.size());
  markup_.push_back({std::move(bytes), "", true});
  absl::StrAppend(&text_, "<x", id, "/>");
}

std::vector<PlaceholderEvent> ReadPlaceholders(absl::string_view translation,
                                               const std::vector<Markup>& markup) {
  std::vector<PlaceholderEvent> out;
  std::vector<bool> seen(markup.size(), false);
  std::vector<int> open;
  size_t i = 0;
  while (i < translation.size()) {
    const size_t lt = translation.find('<', i);
    const size_t gt = lt == absl::string_view::npos ? lt : translation.find('>', lt);
    if (lt != i || gt == absl::string_view::npos) {
      const size_t end = lt == i ? lt + 1 : std::min(lt, translation.size());
      AddText(Unescape(translation.substr(i, end - i)), &out);
      i = end;
      continue;
    }
    const absl::string_view tag = translation.substr(lt, gt + 1 - lt);
    i = gt + 1;
    PlaceholderEvent::Kind kind;
    int id = -1;
    const bool known = ParseTag(tag, &kind, &id) && id < static_cast<int>(markup.size()) &&
                       (kind == PlaceholderEvent::kPoint) == markup[id].point;
    if (known && kind == PlaceholderEvent::kClose) {
      const auto it = std::find(open.begin(), open.end(), id);
      if (it == open.end()) continue;  // a close without its open: dropped
      while (open.size() > static_cast<size_t>(it - open.begin())) {
        out.push_back({PlaceholderEvent::kClose, open.back(), ""});
        open.pop_back();
      }
      continue;
    }
    if (!known || seen[id]) {
      AddText(std::string(tag), &out);
      continue;
    }
    seen[id] = true;
    out.push_back({kind, id, ""});
    if (kind == PlaceholderEvent::kOpen) open.push_back(id);
  }
  while (!open.empty()) {
    out.push_back({PlaceholderEvent::kClose, open.back(), ""});
    open.pop_back();
  }
  for (size_t id = 0; id < markup.size(); ++id) {
    if (seen[id]) continue;
    const int n = static_cast<int>(id);
    out.push_back({markup[id].point ? PlaceholderEvent::kPoint : PlaceholderEvent::kOpen, n, ""});
    if (!markup[id].point) out.push_back({PlaceholderEvent::kClose, n, ""});
  }
  return out;
}

std::string WriteMarkup(absl::string_view translation, const std::vector<Markup>& markup) {
  std::string out;
  for (const PlaceholderEvent& e : ReadPlaceholders(translation, markup)) {
    switch (e.kind) {
      case PlaceholderEvent::kText:
        out += EscapeXmlText(e.text);
        break;
      case PlaceholderEvent::kOpen:
      case PlaceholderEvent::kPoint:
        out += markup[e.id].start;
        break;
      case PlaceholderEvent::kClose:
        out += markup[e.id].end;
        break;
    }
  }
  return out;
}

std::string PlainText(absl::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    const size_t gt = lt == absl::string_view::npos ? lt : text.find('>', lt);
    PlaceholderEvent::Kind kind;
    int id;
    if (gt != absl::string_view::npos && ParseTag(text.substr(lt, gt + 1 - lt), &kind, &id)) {
      out += Unescape(text.substr(i, lt - i));
      i = gt + 1;
    } else {
      const size_t end = lt == absl::string_view::npos ? text.size() : lt + 1;
      out += Unescape(text.substr(i, end - i));
      i = end;
    }
  }
  return out;
}

}  // namespace glossa::server
