// A file's translation, for LibreTranslate's /translate_file and gRPC's TranslateDocument: the
// file read as its extension says (server/files/read_document.h), its segments translated in
// requests through the service (as /translate translates a text: sentence by sentence, spacing
// kept; with inline_tags where the segments carry markup), in file order, and written back.
#ifndef GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_
#define GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/grpc/service.h"

namespace glossa::server {

struct DocumentOptions {
  int64_t max_file_bytes = 20 << 20;  // larger: INVALID_ARGUMENT (the HTTP API answers 413)
  int batch_texts = 64;               // segments per translation request (<= max texts)
  int64_t batch_bytes = 32 << 10;     // and their bytes (a longer segment goes alone)
  absl::Duration timeout = absl::Seconds(120);  // one translation request's deadline
  // A whole document's, all its requests together (the earlier of it and a caller's deadline).
  absl::Duration document_timeout = absl::Minutes(10);
};

struct DocumentJob {
  std::string file_name;
  std::string bytes;
  std::string source;  // a code or "auto"
  std::string target;
  std::string model;   // empty: routed by the languages
};

struct TranslatedDocument {
  std::string file_name;  // TranslatedFileName's
  std::string bytes;
  std::string source;     // translated from (detected with "auto")
  int64_t segments = 0;
};

class DocumentTranslator {
 public:
  // `service` must outlive the translator.
  DocumentTranslator(const TranslatorService* service, DocumentOptions options)
      : service_(service), options_(options) {}

  // The translation of a file; each of its requests ends by `deadline` at the latest. `record`
  // is told the model and result; the caller finishes it. INVALID_ARGUMENT for a file that
  // cannot be read (a message for a client), a pair the server cannot translate; the service's
  // errors otherwise, naming the file's segments.
  absl::StatusOr<TranslatedDocument> Translate(const DocumentJob& job, absl::Time deadline,
                                               RpcRecord* record) const;

  const DocumentOptions& options() const { return options_; }

 private:
  absl::StatusOr<std::vector<std::string>> TranslateSegments(const std::vector<std::string>& texts,
                                                             bool inline_tags,
                                                             const DocumentJob& job,
                                                             const std::string& source,
                                                             absl::Time deadline,
                                                             RpcRecord* record) const;

  const TranslatorService* service_;
  const DocumentOptions options_;
};

// The name LibreTranslate gives a translated file: the target code before the extension
// ("notes.es.srt", "en" -> "notes.es.en.srt"; "README" -> "README.en"), without any folder.
std::string TranslatedFileName(absl::string_view file_name, absl::string_view target);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_
