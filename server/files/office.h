// Office documents and e-books: zip archives (archive.h) of XML parts, each part's paragraphs
// translated (xml_paragraphs.h; an e-book's XHTML as HTML, server/text/html_text.h) and the
// archive written back with every other entry as it was.
//
//   .docx   word/document.xml, headers, footers, footnotes, endnotes, comments (Word's runs)
//   .pptx   slides and their notes (DrawingML's runs)
//   .xlsx   the text cells: shared strings and the sheets' inline strings (SpreadsheetML's runs);
//           numbers and formulas stay
//   .odt .odp  content.xml (OpenDocument's paragraphs and headings)
//   .epub   every .xhtml/.html/.htm entry
#ifndef GLOSSA_SERVER_FILES_OFFICE_H_
#define GLOSSA_SERVER_FILES_OFFICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/documents/document.h"

namespace glossa::server {

// The extensions read here: ".docx", ...
const std::vector<std::string>& OfficeFormats();

// `bytes` as the office format of `extension` (one of OfficeFormats()). INVALID_ARGUMENT for
// bytes that are not such a file (not a zip archive, its main part missing, XML that does not
// parse) or over the limits (archive.h).
absl::StatusOr<std::unique_ptr<Document>> ReadOfficeDocument(absl::string_view extension,
                                                             std::string bytes,
                                                             const DocumentLimits& limits);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILES_OFFICE_H_
