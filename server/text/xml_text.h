// XML as DeepL's tag_handling=xml takes it: the text between the tags is translated and the tags
// are kept, placed on the words they marked. The XML is cut into runs (HtmlText, as for HTML):
// a run is the text and inline elements between structure tags, sent as one text with
// placeholders (placeholders.h) and TranslateRequest.inline_tags. What splits:
//  - an element in splitting_tags (its start and end tags, or the empty element itself);
//  - with outline_detection, a container: an element (or the XML itself) not in
//    non_splitting_tags that holds elements and neither text of its own nor spaces between
//    them on one line ("<b>a</b> <i>b</i>" is inline), and each element in a container that
//    is not in non_splitting_tags (a segment of its own);
//  - any element that holds one of those.
// An element in ignore_tags is kept byte for byte with everything inside it, as an empty
// element of its run: its text is never translated. Comments, CDATA sections, processing
// instructions and declarations are kept the same way. A tag never closed, or closed without
// its start, is kept as an empty element. Text is decoded (XML's five entities and numeric
// references) and written back with & < > escaped. A run with more elements than a request
// takes is sent as its text pieces, each alone.
#ifndef GLOSSA_SERVER_TEXT_XML_TEXT_H_
#define GLOSSA_SERVER_TEXT_XML_TEXT_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/text/html_text.h"

namespace glossa::server {

struct XmlTextOptions {
  std::set<std::string> ignore_tags, splitting_tags, non_splitting_tags;  // element names
  bool outline_detection = true;
};

// INVALID_ARGUMENT when the XML is not UTF-8, holds more than 10,000 tags, or a tag, comment
// or section is not closed by the end of the text. Write the translations back with
// ReplaceHtmlText.
absl::StatusOr<HtmlText> ExtractXmlText(absl::string_view xml, const XmlTextOptions& options);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_XML_TEXT_H_
