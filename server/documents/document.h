// Documents: a file's text, in segments to translate, and the file written back with their
// translations, every byte outside the segments unchanged.
//
// A segment is a run of prose (a line of a text file, a Markdown paragraph or table cell, a
// subtitle cue, an HTML text node); the server translates each as a small document of its own
// (it splits sentences itself). Text without a letter ("1.", "--") is not a segment. The format
// is chosen by the file name's extension:
//
//   .txt              each line, its blanks at both ends kept outside (document.cc)
//   .md, .markdown    paragraphs, headings, list items, table cells (markdown.h)
//   .srt, .vtt        each cue's text, its lines joined (subtitles.h)
//   .html, .htm       each run of text and inline elements (server/text/html_text.h)
//
// In the text formats a segment's text is plain text: inline markup (a link's destination, a
// code span) ends the segment before it and is kept as it is (segments.h). In HTML a segment
// carries its inline markup as placeholders (inline_tags()), so that a sentence with a tag
// inside is translated whole.
#ifndef GLOSSA_SERVER_DOCUMENTS_DOCUMENT_H_
#define GLOSSA_SERVER_DOCUMENTS_DOCUMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct DocumentLimits {
  int64_t max_bytes = 20 << 20;
  int64_t max_segments = 200000;
  // Told the bytes a reader is about to hold beyond the file (an archive's inflated entries)
  // before it holds them; its error ends the read. Unset: nothing is told.
  std::function<absl::Status(int64_t)> reserve;
};

// One file's text and how to write it back.
class Document {
 public:
  virtual ~Document() = default;

  // The segments to translate, in file order.
  const std::vector<std::string>& texts() const { return texts_; }

  // Whether texts() carry inline markup as placeholders (server/text/placeholders.h), their
  // text escaped: they are translated with TranslateRequest.inline_tags.
  virtual bool inline_tags() const { return false; }

  // The file with translations[i] in place of texts()[i]. A translation equal to its segment's
  // text leaves the segment's bytes as they were, so Write(texts()) gives the file back byte for
  // byte. INVALID_ARGUMENT when there are not as many translations as segments.
  virtual absl::StatusOr<std::string> Write(const std::vector<std::string>& translations) const = 0;

 protected:
  std::vector<std::string> texts_;
};

// Reads `bytes` as the text format its file name's extension (case-insensitive) names.
// INVALID_ARGUMENT with a message for a client for: another extension or PDF (naming the text
// formats), bytes that are not UTF-8, a file over the limits. Every format, office documents
// included: ReadDocument (server/files/read_document.h).
absl::StatusOr<std::unique_ptr<Document>> ReadTextDocument(absl::string_view file_name,
                                                           std::string bytes,
                                                           const DocumentLimits& limits = {});

// The extensions ReadTextDocument reads: ".txt", ".md", ...
std::vector<std::string> TextDocumentFormats();

// ".md" for "notes/README.MD"; empty when the name has no extension.
std::string DocumentExtension(absl::string_view file_name);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DOCUMENTS_DOCUMENT_H_
