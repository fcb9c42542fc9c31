#include "server/text/html_text.h"

#include <gumbo.h>
#include <pthread.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "text/inline_tags.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

struct OutputDeleter {
  void operator()(GumboOutput* output) const {
    gumbo_destroy_output(&kGumboDefaultOptions, output);
  }
};

constexpr int64_t kMaxHtmlTags = 10000;

// Elements whose text is code or data, not prose.
bool KeepsItsText(GumboTag tag) {
  return tag == GUMBO_TAG_SCRIPT || tag == GUMBO_TAG_STYLE || tag == GUMBO_TAG_CODE ||
         tag == GUMBO_TAG_PRE || tag == GUMBO_TAG_TEXTAREA || tag == GUMBO_TAG_NOSCRIPT;
}

// Depth first, in document order, with a stack of its own: nesting depth is the client's choice.
void CollectText(const GumboNode* root, size_t html_size, HtmlText* out) {
  std::vector<const GumboNode*> stack = {root};
  while (!stack.empty()) {
    const GumboNode* node = stack.back();
    stack.pop_back();
    if (node->type == GUMBO_NODE_TEXT) {
      const GumboText& text = node->v.text;
      const size_t begin = text.start_pos.offset;
      const size_t end = begin + text.original_text.length;
      // Only text that stands where the source has it (gumbo moves some misplaced table text).
      if (text.original_text.length > 0 && end <= html_size &&
          (out->spans.empty() || out->spans.back().second <= begin)) {
        out->texts.push_back(text.text);
        out->spans.emplace_back(begin, end);
      }
      continue;
    }
    const bool document = node->type == GUMBO_NODE_DOCUMENT;
    if (!document && node->type != GUMBO_NODE_ELEMENT && node->type != GUMBO_NODE_TEMPLATE) {
      continue;  // comments, CDATA, whitespace
    }
    if (!document && KeepsItsText(node->v.element.tag)) continue;
    const GumboVector& children = document ? node->v.document.children : node->v.element.children;
    for (unsigned i = children.length; i > 0; --i) {
      stack.push_back(static_cast<const GumboNode*>(children.data[i - 1]));
    }
  }
}

// Runs fn on a thread with a stack of `bytes`, and waits for it. False if no thread started.
bool RunWithStack(size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_t thread;
  const bool started = pthread_attr_setstacksize(&attr, bytes) == 0 &&
                       pthread_create(
                           &thread, &attr,
                           [](void* f) -> void* {
                             (*static_cast<const std::function<void()>*>(f))();
                             return nullptr;
                           },
                           const_cast<std::function<void()>*>(&fn)) == 0;
  pthread_attr_destroy(&attr);
  if (started) pthread_join(thread, nullptr);
  return started;
}

}  // namespace

absl::StatusOr<HtmlText> ExtractHtmlText(absl::string_view html) {
  if (!IsValidUtf8(html)) return absl::InvalidArgumentError("the HTML is not valid UTF-8");
  // Bounds the nesting depth (at most one level a tag) for the stack below.
  if (std::count(html.begin(), html.end(), '<') > kMaxHtmlTags) {
    return absl::InvalidArgumentError(
        absl::StrCat("the HTML has more than ", kMaxHtmlTags, " tags: send it in parts"));
  }
  // gumbo builds and frees its tree recursively, a few hundred bytes of stack a nesting level:
  // more than an HTTP thread has (measured: civetweb's threads overflowed at 4000 nested
  // tags), so it runs on a thread with a stack for the deepest nesting allowed.
  HtmlText out;
  bool parsed = false;
  const bool ran = RunWithStack(size_t{64} << 20, [&] {
    std::unique_ptr<GumboOutput, OutputDeleter> output(
        gumbo_parse_with_options(&kGumboDefaultOptions, html.data(), html.size()));
    if (output == nullptr) return;
    CollectText(output->document, html.size(), &out);
    parsed = true;
  });
  if (!ran) return absl::ResourceExhaustedError("no thread to parse the HTML: try again later");
  if (!parsed) return absl::InvalidArgumentError("the HTML cannot be parsed");
  return out;
}

std::string ReplaceHtmlText(absl::string_view html, const HtmlText& text,
                            const std::vector<std::string>& translations) {
  std::string out;
  size_t pos = 0;
  for (size_t i = 0; i < text.spans.size() && i < translations.size(); ++i) {
    const auto [begin, end] = text.spans[i];
    absl::StrAppend(&out, html.substr(pos, begin - pos), EscapeXmlText(translations[i]));
    pos = end;
  }
  absl::StrAppend(&out, html.substr(pos));
  return out;
}

}  // namespace glossa::server
