// LibreTranslate's API (its /translate, /languages and /detect), so that the tools written for
// it (browser extensions, chat and forum plugins, editors, scripts) can point at Glossa. Shapes:
//   POST /translate  JSON or form: q (string, or array of strings in JSON), source, target,
//                    format (text: documents, split into sentences; html: the text nodes,
//                    server/text/html_text.h), alternatives (n), api_key
//                    -> {"translatedText": "..."} or {"translatedText": ["...", ...]}, with
//                       "alternatives": [...] (per text in the array case) when asked for
//   GET /languages   -> [{"code": "es", "name": "Spanish", "targets": ["en"]}, ...]
//   POST /detect     q -> [{"confidence": 97.0, "language": "es"}, ...] (CLD2, among the
//                    server's languages; source "auto" in /translate uses it too and adds
//                    "detectedLanguage" to the answer)
// Errors are {"error": "..."} with 400 (the request), 403 (the API key), 429 (queue full), 500.
#ifndef GLOSSA_SERVER_HTTP_API_LIBRETRANSLATE_H_
#define GLOSSA_SERVER_HTTP_API_LIBRETRANSLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/rate_limiter.h"
#include "server/http/http_server.h"
#include "server/models/model_registry.h"
#include "server/grpc/service.h"

namespace glossa::server {

// LibreTranslate's limits (--char_limit, --batch_limit, --req_limit): a 400 for a q item of more
// characters or a q array of more items, a 429 {"error": "Slowdown: N per 1 minute"} past the
// requests a client (its token's name, or its address when the server requires no token) may
// make a minute on /translate, /detect and /translate_file.
struct LibreLimits {
  int char_limit = -1;               // characters (code points) per q item; -1: none
  int batch_limit = -1;              // items in a q array; -1: none
  RateLimiter* requests = nullptr;   // null: no rate limit
};

HttpResponse LibreTranslate(const TranslatorService& service, const HttpRequest& request,
                            absl::Duration timeout, const LibreLimits& limits = {});
HttpResponse LibreLanguages(const TranslatorService& service);
// The English name of a language code, as /languages gives it (the code itself when unknown).
std::string LanguageName(const std::string& code);
HttpResponse LibreDetect(const TranslatorService& service, const HttpRequest& request,
                         const LibreLimits& limits = {});

// The client's next request against --req_limit (limits.requests), once its token was checked
// (`client`: its id, TranslatorService::Identify): keyed by the client's name when the server
// requires tokens, so that each --auth_token_file client has a bucket of its own wherever it
// connects from, and by its address when it requires none. Never by the key a request presents:
// one made up would get a bucket of its own. RESOURCE_EXHAUSTED "Slowdown: N per 1 minute" past
// it.
absl::Status CheckLibreRate(const TranslatorService& service, const HttpRequest& http, int client,
                            const LibreLimits& limits);
// INVALID_ARGUMENT with LibreTranslate's wording when the server cannot translate the pair.
absl::Status CheckLibrePair(const TranslatorService& service, const std::string& source,
                            const std::string& target);

// A /translate request, from JSON or form fields.
struct LibreRequest {
  std::vector<std::string> q;
  bool batch = false;  // q was an array: answer with arrays
  std::string source, target, format, api_key;
  int alternatives = 0;
  // Glossa's additions: {"term": "translation" or ["translation", ...], ...} (in a form, that
  // object as JSON text), and a stored glossary's id (TranslateRequest.glossary, glossary_id).
  std::vector<std::pair<std::string, std::vector<std::string>>> glossary;
  std::string glossary_id;
};
// INVALID_ARGUMENT with LibreTranslate's wording ("Invalid request: missing q parameter").
absl::StatusOr<LibreRequest> ParseLibreRequest(const HttpRequest& request);

// application/x-www-form-urlencoded fields ("a=1&b=x+y%21"), decoded; repeated names keep the
// first value.
std::vector<std::pair<std::string, std::string>> ParseFormFields(absl::string_view body);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_API_LIBRETRANSLATE_H_
