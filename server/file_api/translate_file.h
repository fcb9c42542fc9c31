// LibreTranslate's file API over the server's document jobs (server/jobs/document_jobs.h):
//   POST /translate_file  multipart/form-data: file (with its filename), source (a code or
//                         "auto"), target, api_key
//                         -> {"translatedFileUrl": "http://HOST/download_file/<name>"}
//   GET /download_file/<name>  the translated file, as an attachment named as LibreTranslate
//                         names it (report.txt -> report.en.txt)
// Each segment of the file is translated as /translate translates a text (sentence by sentence,
// spacing kept), in requests of a bounded number of segments and bytes, in file order; "auto"
// detects the language once, from the document's text. The HTTP thread waits for the document's
// worker (LibreTranslate's clients expect the answer in the response); at most
// max_waiting uploads wait at once, so that the other HTTP threads stay free for /health and
// /translate, and a document whose client goes away is cancelled. The translated files are kept in a
// FileStore (file_store.h). Keys, the rate limit and the error shapes are /translate's.
#ifndef GLOSSA_SERVER_FILE_API_TRANSLATE_FILE_H_
#define GLOSSA_SERVER_FILE_API_TRANSLATE_FILE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/jobs/document_jobs.h"
#include "server/file_api/file_store.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"
#include "server/http_api/libretranslate.h"

namespace glossa::server {

struct FileApiOptions {
  int64_t max_file_bytes = 20 << 20;  // an upload's file (--max_file_mb); larger: 413
  absl::Duration keep = absl::Minutes(30);  // how long a translated file can be downloaded
  int64_t keep_bytes = 256 << 20;     // translated files kept in all; the oldest go first
  int max_waiting = 8;                // uploads waiting for their document at once; more: 429
};

class FileApi {
 public:
  // service, limits (the rate limiter /translate uses) and jobs must outlive the API.
  FileApi(const TranslatorService* service, const LibreLimits* limits, FileApiOptions options,
          DocumentJobs* jobs)
      : service_(service),
        limits_(limits),
        options_(options),
        jobs_(jobs),
        store_(options.keep, options.keep_bytes) {}

  // POST /translate_file and GET /download_file/<name>.
  HttpResponse Handle(const HttpRequest& request);
  // The body bound the HTTP server needs for /translate_file: the file and the other fields.
  int64_t max_body_bytes() const { return options_.max_file_bytes + (64 << 10); }

 private:
  HttpResponse TranslateFile(const HttpRequest& request);
  // The document's translation by a job worker, waited for on this thread.
  absl::StatusOr<TranslatedDocument> Wait(DocumentJob job, const HttpRequest& http,
                                          RpcRecord* record);
  HttpResponse Download(absl::string_view name);

  const TranslatorService* service_;
  const LibreLimits* limits_;
  const FileApiOptions options_;
  DocumentJobs* jobs_;
  std::atomic<int> waiting_{0};
  FileStore store_;
};

// The Content-Type a download of `file_name` is sent with, by its extension.
std::string ContentTypeFor(absl::string_view file_name);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILE_API_TRANSLATE_FILE_H_
