// Text with inline tags ("Hola <b>mundo</b> &amp; más.<br/>"), for TranslateRequest.inline_tags
// and glossa-translate's --inline_tags: the text without its tags, each element as a span of it,
// and the text rebuilt with the tags placed on a translation (text/markup.h). A tag is '<', a
// letter or '/', and everything up to the next '>'. Between tags, XML's five entities (&lt; &gt;
// &amp; &quot; &apos;) and numeric references (&#233; &#xE9;) are decoded; any other '&' is
// text. The rebuilt text escapes & < > in the translation.
// An element closed later in the line is a span; a self-closing tag, a void element (br, img,
// hr, wbr), a closing tag without its start and a start tag never closed are points: nothing
// is lost, and the output is well-formed whenever the input was.
#ifndef GLOSSA_RUNTIME_TEXT_INLINE_TAGS_H_
#define GLOSSA_RUNTIME_TEXT_INLINE_TAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/markup.h"

namespace glossa {

struct TaggedText {
  std::string text;              // the line without its tags
  std::vector<TextSpan> spans;   // in the order of their start tags
  std::vector<std::string> starts, ends;  // each span's tags as written (a point: start only)
};

TaggedText ParseInlineTags(absl::string_view line);

// `text` with & < > written as &amp; &lt; &gt; (what XML and HTML text need).
std::string EscapeXmlText(absl::string_view text);

// The most elements a text may carry: placing them takes time in their number squared (nesting)
// and times the tokens of the sentence (alignment).
constexpr size_t kMaxInlineTags = 512;

// Each text parsed (ParseInlineTags), for a request's texts. INVALID_ARGUMENT names the first
// text that is not valid UTF-8 (checked before its tags are taken out, which could hide bytes
// that would come back in the output) or has more than kMaxInlineTags elements.
absl::StatusOr<std::vector<TaggedText>> ParseTaggedTexts(const std::vector<std::string>& texts);

// `target` with each span's tags written where PlaceSpans put them (unplaced: around it all).
std::string WriteInlineTags(absl::string_view target, const TaggedText& tags,
                            const std::vector<std::optional<TextSpan>>& placed);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_INLINE_TAGS_H_
