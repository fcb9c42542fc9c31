// Every format /translate_file reads, by the file name's extension: the text formats
// (server/documents/document.h) and the office documents and e-books (office.h).
#ifndef GLOSSA_SERVER_FILES_READ_DOCUMENT_H_
#define GLOSSA_SERVER_FILES_READ_DOCUMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/documents/document.h"

namespace glossa::server {

// Reads `bytes` as the format its file name's extension (case-insensitive) names.
// INVALID_ARGUMENT with a message for a client for: an unsupported extension or PDF (naming the
// supported formats), a file over the limits, bytes that are not such a file (text that is not
// UTF-8, an archive that is damaged or a zip bomb, ...).
absl::StatusOr<std::unique_ptr<Document>> ReadDocument(absl::string_view file_name,
                                                       std::string bytes,
                                                       const DocumentLimits& limits = {});

// The extensions ReadDocument reads: ".txt", ".md", ..., ".docx", ...
std::vector<std::string> SupportedDocumentFormats();

// The same list for code that does not link the readers (glossa-batch picks the files of a
// folder by it); a unit test checks that it is SupportedDocumentFormats().
inline constexpr absl::string_view kDocumentExtensions[] = {
    ".txt", ".md",   ".markdown", ".srt", ".vtt", ".html", ".htm",
    ".docx", ".pptx", ".xlsx",    ".odt", ".odp", ".epub"};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILES_READ_DOCUMENT_H_
