// LibreTranslate's format=html: the text of an HTML fragment or document is translated and
// everything else is kept byte for byte. The HTML is parsed with gumbo (Debian's libgumbo, an
// HTML5 parser), which gives each node's position in the source. Text inside script, style,
// code, pre and textarea is kept as it is, as are attribute values and comments.
//
// What is translated is a run: consecutive text and inline elements (b, i, a, span, em,
// strong, ...) between block boundaries (p, li, td, div, br, ...), sent as one text with
// placeholders (placeholders.h) so that a sentence with a tag inside is translated whole and
// the tags land on the words they marked. Images, code spans and comments inside a run keep
// their relative place as empty elements. A run is cut where its source is not contiguous
// (the parser implied or moved a tag: "<b>bold" never closed); a run with more elements than
// a request takes is sent as its text nodes, each alone.
#ifndef GLOSSA_SERVER_TEXT_HTML_TEXT_H_
#define GLOSSA_SERVER_TEXT_HTML_TEXT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/text/placeholders.h"

namespace glossa::server {

struct HtmlText {
  // What to translate: each run's text with placeholders (escaped: send with inline_tags).
  std::vector<std::string> texts;
  // Where each run's source is: [begin, end) byte offsets into the HTML.
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<std::vector<Markup>> markup;  // what each run's placeholders stand for
};

// INVALID_ARGUMENT when the HTML is not UTF-8. An element named in `ignore_tags` (lower-case
// names) is kept byte for byte with everything inside it: inside a run as one empty element,
// elsewhere left out of the runs; its text is never translated.
absl::StatusOr<HtmlText> ExtractHtmlText(absl::string_view html,
                                         const std::set<std::string>& ignore_tags = {});

// The HTML with each run replaced by its translation (translations[i] for texts[i], with the
// placeholders that inline_tags placed), each placeholder written back as its markup.
std::string ReplaceHtmlText(absl::string_view html, const HtmlText& text,
                            const std::vector<std::string>& translations);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_HTML_TEXT_H_
