// The HTTP/JSON API of glossa-server (--http_listen): LibreTranslate's routes (POST /translate,
// GET /languages, POST /detect: server/http_api/libretranslate.h; and GET /health,
// GET /frontend/settings, POST /suggest, answered here; POST /translate_file and
// GET /download_file/<name> through the handler SetFileApi gives), Glossa's own POST
// /v1/translate and GET /v1/models (protobuf's JSON mapping of TranslateRequest,
// TranslateResponse and ListModelsResponse), the stored glossaries at /v1/glossaries
// (glossary_routes.cc), DeepL's API under /v2/ through the handler SetDeeplApi gives, and the
// page at GET /. Translations go through TranslatorService's
// transport-neutral NewTranslateJob, so limits, validation, the token, metrics (method label =
// the path) and batching are gRPC's own.
#ifndef GLOSSA_SERVER_HTTP_API_HTTP_API_H_
#define GLOSSA_SERVER_HTTP_API_HTTP_API_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "glossa/v1/translator.pb.h"
#include "server/http/http_server.h"
#include "server/http_api/libretranslate.h"
#include "server/http_api/web_page.h"
#include "server/glossaries/glossary_store.h"
#include "server/metrics/metrics.h"
#include "server/grpc/service.h"

namespace glossa::server {

class HttpApi {
 public:
  // service must outlive the API. timeout: how long one translation may take (then 504).
  HttpApi(const TranslatorService* service, absl::Duration timeout)
      : service_(service), timeout_(timeout) {}

  HttpResponse Handle(const HttpRequest& request) const;
  // The stored glossaries of /v1/glossaries (null: those routes answer 404). Must outlive the
  // API.
  void SetGlossaries(GlossaryStore* store) { glossaries_ = store; }
  // What the page at / says above its form, and example sentences it offers (web_page.h).
  void SetIntroduction(absl::string_view about, const std::vector<std::string>& examples) {
    page_ = WebPage(about, examples);
  }
  // LibreTranslate's limits on its routes: characters per text and texts per request (-1: none),
  // requests per client per minute (<= 0: none).
  void SetLibreLimits(int char_limit, int batch_limit, int requests_per_minute) {
    limiter_ = std::make_unique<RateLimiter>(requests_per_minute);
    libre_limits_.char_limit = char_limit;
    libre_limits_.batch_limit = batch_limit;
    libre_limits_.requests = requests_per_minute > 0 ? limiter_.get() : nullptr;
  }
  const LibreLimits& libre_limits() const { return libre_limits_; }
  // LibreTranslate's file API (POST /translate_file, GET /download_file/<name>), served by a
  // room above this one (server/file_api/) through `handler`; `formats` are the extensions it
  // reads, as /frontend/settings lists them. Without it those routes answer 404 and the
  // settings say files are not translated.
  void SetFileApi(HttpHandler handler, std::vector<std::string> formats) {
    file_handler_ = std::move(handler);
    file_formats_ = std::move(formats);
  }
  // DeepL's API (every path under /v2/), served by a room above this one (server/deepl/)
  // through `handler`. Without it those paths answer 404.
  void SetDeeplApi(HttpHandler handler) { deepl_handler_ = std::move(handler); }

 private:
  HttpResponse V1Translate(const HttpRequest& request) const;
  HttpResponse V1Models(const HttpRequest& request) const;
  // /v1/glossaries and below, after DeepL's /v2/glossaries (in glossary_routes.cc).
  HttpResponse V1Glossaries(const HttpRequest& request) const;

  const TranslatorService* service_;
  absl::Duration timeout_;
  GlossaryStore* glossaries_ = nullptr;
  std::string page_ = WebPage("", {});
  std::unique_ptr<RateLimiter> limiter_;
  LibreLimits libre_limits_;
  HttpHandler file_handler_;
  std::vector<std::string> file_formats_;
  HttpHandler deepl_handler_;
};

// Translates `request` through the service as gRPC's Translate does and waits for the result
// (this HTTP thread blocks; the engine batches it with everything else). `record` is told the
// model and result; the caller finishes it. `cancelled` (optional) cancels the job once set
// (seen within 50 ms).
absl::StatusOr<v1::TranslateResponse> TranslateAndWait(
    const TranslatorService& service, const v1::TranslateRequest& request, absl::Duration timeout,
    RpcRecord* record, const std::atomic<bool>* cancelled = nullptr);

// The HTTP status for an error: 400 for requests to change, 403 for the token, 404 for an
// unknown model, 429 when the queue is full, 503 while shutting down, 504 past the deadline.
int HttpStatusFor(const absl::Status& status);
// {"error": message} with that status (LibreTranslate's error shape).
HttpResponse JsonError(int status, absl::string_view message);
HttpResponse JsonError(const absl::Status& status);
// The token of an "Authorization: Bearer <token>" header ("" when there is none).
absl::string_view BearerToken(absl::string_view authorization);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_API_HTTP_API_H_
