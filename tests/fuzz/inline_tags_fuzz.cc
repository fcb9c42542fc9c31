// Fuzzes inline tags (runtime/text/inline_tags.h, TranslateRequest.inline_tags) and the
// placeholders documents send with them (server/text/placeholders.h). Input: a text with tags.
// Checks: every span lies within the text, in start order; writing the tags back on the text
// where they were gives a text that parses to the same text, and, for well-formed markup, as
// many spans; reading it as placeholders gives balanced opens and closes.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz_util.h"
#include "server/text/placeholders.h"
#include "text/inline_tags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const glossa::TaggedText tags = glossa::ParseInlineTags(line);
  FUZZ_CHECK(tags.starts.size() == tags.spans.size() && tags.ends.size() == tags.spans.size(),
             "tags and spans differ in number");
  std::vector<std::optional<glossa::TextSpan>> placed;
  for (size_t i = 0; i < tags.spans.size(); ++i) {
    const glossa::TextSpan& s = tags.spans[i];
    FUZZ_CHECK(s.begin <= s.end && s.end <= tags.text.size(), "a span outside the text");
    FUZZ_CHECK(i == 0 || tags.spans[i - 1].begin <= s.begin, "spans out of order");
    placed.push_back(s);
  }
  // Well-formed markup (no two spans cross, no start tag left open, no end tag without its start)
  // reads the same written back; a stray tag is a point, and two points can pair up.
  bool nested = true;
  for (size_t i = 0; i < tags.spans.size(); ++i) {
    const std::string& start = tags.starts[i];
    const bool empty_element = absl::EndsWith(start, "/>") || absl::StartsWith(start, "<br") ||
                               absl::StartsWith(start, "<img") || absl::StartsWith(start, "<hr") ||
                               absl::StartsWith(start, "<wbr");
    if (tags.ends[i].empty() && !empty_element) nested = false;
  }
  for (size_t i = 0; i < tags.spans.size(); ++i) {
    for (size_t j = i + 1; j < tags.spans.size() && nested; ++j) {
      const glossa::TextSpan &a = tags.spans[i], &b = tags.spans[j];
      nested = b.begin >= a.end || b.end <= a.end;
    }
  }
  if (tags.spans.size() <= glossa::kMaxInlineTags) {
    const std::string written = glossa::WriteInlineTags(tags.text, tags, placed);
    const glossa::TaggedText again = glossa::ParseInlineTags(written);
    FUZZ_CHECK(again.text == tags.text, "the written tags change the text");
    FUZZ_CHECK(!nested || again.spans.size() == tags.spans.size(),
               "the written tags change the spans of nested markup");
  }
  std::vector<glossa::server::Markup> markup(8);
  for (size_t i = 0; i < markup.size(); ++i) markup[i].point = i % 3 == 2;
  int depth = 0;
  for (const auto& e : glossa::server::ReadPlaceholders(line, markup)) {
    if (e.kind == glossa::server::PlaceholderEvent::kOpen) ++depth;
    if (e.kind == glossa::server::PlaceholderEvent::kClose) --depth;
    FUZZ_CHECK(depth >= 0, "a close before its open");
  }
  FUZZ_CHECK(depth == 0, "an element left open");
  return 0;
}
