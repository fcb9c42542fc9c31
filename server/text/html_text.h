// LibreTranslate's format=html: the text of an HTML fragment or document is translated and
// everything else is kept byte for byte. The HTML is parsed with gumbo (Debian's libgumbo, an
// HTML5 parser), which gives each text node's position in the source; each node's text
// (entities decoded) is translated as a small document of its own and written back, escaped,
// in place of the node's source. Text inside script, style, code, pre and textarea is kept as
// it is, as are attribute values and comments.
//
// Inline tags: a tag inside a sentence ("Hola <b>mundo</b> cruel.") cuts it into text nodes
// translated apart ("Hola ", "mundo", " cruel."): every tag is kept, at the cost of
// translating such a sentence in pieces.
#ifndef GLOSSA_SERVER_TEXT_HTML_TEXT_H_
#define GLOSSA_SERVER_TEXT_HTML_TEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct HtmlText {
  std::vector<std::string> texts;  // what to translate: each text node's decoded text
  // Where each text node's source is: [begin, end) byte offsets into the HTML.
  std::vector<std::pair<size_t, size_t>> spans;
};

// INVALID_ARGUMENT when the HTML is not UTF-8.
absl::StatusOr<HtmlText> ExtractHtmlText(absl::string_view html);

// The HTML with each text node replaced by its translation (translations[i] for texts[i]),
// escaped for HTML text (& < >).
std::string ReplaceHtmlText(absl::string_view html, const HtmlText& text,
                            const std::vector<std::string>& translations);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_HTML_TEXT_H_
