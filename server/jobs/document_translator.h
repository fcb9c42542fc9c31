// A file's translation, for every front end's documents (run by DocumentJobs, document_jobs.h):
// the file read as its extension says (server/files/read_document.h), its segments translated in
// requests through the service (as /translate translates a text: sentence by sentence, spacing
// kept; with inline_tags where the segments carry markup), in file order, and written back.
#ifndef GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_
#define GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/jobs/memory_budget.h"
#include "server/documents/document.h"
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

// What a document in translation shares with those who wait for it: its progress, and a flag
// that cancels it (seen between its requests and by the request in flight, within 50 ms).
struct DocumentProgress {
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> segments_done{0};
  std::atomic<int64_t> segments_total{0};  // 0 until the file is read
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
  // errors otherwise, naming the file's segments; CANCELLED once progress->cancelled is set.
  // `memory` (optional) grows by what the document holds beyond its bytes (inflated parts,
  // segments, translations, the file written), estimated, before it is held: its errors end
  // the translation.
  absl::StatusOr<TranslatedDocument> Translate(const DocumentJob& job, absl::Time deadline,
                                               RpcRecord* record,
                                               DocumentProgress* progress = nullptr,
                                               MemoryBudget::Reservation* memory = nullptr) const;

  const DocumentOptions& options() const { return options_; }

 private:
  absl::StatusOr<std::vector<std::string>> TranslateSegments(const std::vector<std::string>& texts,
                                                             bool inline_tags,
                                                             const DocumentJob& job,
                                                             const std::string& source,
                                                             absl::Time deadline,
                                                             RpcRecord* record,
                                                             DocumentProgress* progress) const;

  // The job's source language, detected from the document's text for "auto".
  absl::StatusOr<std::string> SourceOf(const DocumentJob& job, const Document& document) const;

  const TranslatorService* service_;
  const DocumentOptions options_;
};

// The name LibreTranslate gives a translated file: the target code before the extension
// ("notes.es.srt", "en" -> "notes.es.en.srt"; "README" -> "README.en"), without any folder.
std::string TranslatedFileName(absl::string_view file_name, absl::string_view target);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILE_API_DOCUMENT_TRANSLATOR_H_
