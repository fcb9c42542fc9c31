// The paragraphs of an office document's XML part, for translation: each paragraph is one text
// with its inline markup as placeholders (server/text/placeholders.h), so that a sentence split
// over differently formatted runs is translated whole, and is written back with the markup on
// the words the translation put it on. The XML is read and written with pugixml (Debian's
// libpugixml-dev: small, fast, keeps comments, processing instructions and whitespace as read,
// and never expands DTD entities; a part that declares a DTD is refused all the same, as no
// office document has one).
//
// Two shapes of paragraph:
//  - runs (Office Open XML: Word's w:p of w:r, PowerPoint's a:p of a:r, Excel's shared strings'
//    si of r, and a sheet's inline strings, is): each run's properties (w:rPr: bold, italic, font,
//    ...) are its formatting. The paragraph's most used formatting is its base; text in another
//    formatting is an element <gN> (consecutive runs of one formatting are one element); a
//    hyperlink is an element around its runs; anything else in a run or a paragraph (a tab, a
//    break, a drawing, a bookmark, a field) is an empty element that keeps its place. Written back,
//    each piece of text is a run with its element's properties.
//  - mixed content (OpenDocument's text:p and text:h): text with text:span and text:a around
//    parts of it (elements), and other elements (text:s, text:tab, frames) kept as empty ones.
//    As with runs, the paragraph's most used span style (or bare text) is its base: a paragraph
//    LibreOffice writes as spans only ("not bold", "bold", "not bold") gets its bold span placed
//    and the rest written back in the base span.
// A paragraph holding what cannot be rewritten as runs (tracked changes, content controls,
// fields, math, nested paragraphs) is translated text node by text node instead, each node's
// text alone. The XML outside the paragraphs that change is written back as pugixml writes it
// (the same XML: attribute quotes and character escapes may differ from the source bytes), and a
// part in which nothing changes comes back byte for byte.
#ifndef GLOSSA_SERVER_FILES_XML_PARAGRAPHS_H_
#define GLOSSA_SERVER_FILES_XML_PARAGRAPHS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct XmlDialect {
  std::string paragraph;                     // "w:p"
  std::string heading;                       // "text:h": a paragraph too
  std::string run;                           // "w:r"; empty: mixed content
  std::string run_properties;                // "w:rPr"
  std::string text;                          // "w:t": the element that holds a run's text
  std::string paragraph_start;               // "w:pPr": kept first
  std::string paragraph_end;                 // "a:endParaRPr": kept last
  std::string link;                          // "w:hyperlink": an element around runs
  bool preserve_space = true;                // xml:space="preserve" on written text elements
  std::vector<std::string> inline_elements;  // mixed content: elements around text
  std::vector<std::string> dropped;          // left out when a paragraph is rewritten
  std::vector<std::string> complex;          // make a paragraph go node by node
  std::string spaces;                        // mixed content: an element for spaces (text:s)
  std::string style_element;                 // mixed content: the span that formats text
};

const XmlDialect& WordDialect();          // .docx
const XmlDialect& DrawingDialect();       // .pptx
const XmlDialect& SpreadsheetDialect();   // .xlsx shared strings
const XmlDialect& OpenDocumentDialect();  // .odt, .odp

// The texts to translate in `xml`, in document order, each with placeholders. `what` names the
// part in messages. INVALID_ARGUMENT for XML that does not parse, declares a DTD or nests
// deeper than 256.
absl::StatusOr<std::vector<std::string>> ReadXmlParagraphs(absl::string_view xml,
                                                           const XmlDialect& dialect,
                                                           absl::string_view what);

// `xml` with translations[i] in place of text i of ReadXmlParagraphs (as many).
absl::StatusOr<std::string> WriteXmlParagraphs(absl::string_view xml, const XmlDialect& dialect,
                                               const std::vector<std::string>& translations);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILES_XML_PARAGRAPHS_H_
