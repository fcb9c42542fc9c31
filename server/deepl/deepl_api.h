// DeepL's API v2 (text translation, languages, usage, glossaries), so that the tools written
// against DeepL (CAT tools, subtitle editors, browser extensions, its official client libraries
// with their server URL set) can use Glossa. HttpApi hands it every path under /v2/:
//   POST /v2/translate                text (repeated, at most 50), target_lang, source_lang
//                                     (absent: detected per text), split_sentences,
//                                     tag_handling (xml, html) with ignore_tags,
//                                     splitting_tags, non_splitting_tags, outline_detection,
//                                     glossary_id, formality, show_billed_characters
//                                     -> {"translations": [{"detected_source_language": "ES",
//                                         "text": "..."}, ...]}
//   GET|POST /v2/languages?type=source|target, GET|POST /v2/usage,
//   GET /v2/glossary-language-pairs, /v2/glossaries (POST, GET; GET, DELETE /<id>;
//   GET /<id>/entries) over the same store as /v1/glossaries.
// /v2/document answers 501. Bodies are form fields or JSON (deepl_request.h). The key is the
// header "Authorization: DeepL-Auth-Key <key>", one of the server's tokens when it has any
// (with none, any key or none is accepted). Errors are {"message": "..."} with DeepL's codes:
// 400 the request, 403 the key, 404 unknown, 413 too large, 429 too many requests (queue
// full, --req_limit), 456 the glossary store full, 500, 501, 503 while draining, 504.
#ifndef GLOSSA_SERVER_DEEPL_DEEPL_API_H_
#define GLOSSA_SERVER_DEEPL_DEEPL_API_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/glossaries/glossary_store.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"
#include "server/http_api/libretranslate.h"

namespace glossa::server {

class DeeplApi {
 public:
  // service, glossaries (null: the glossary routes answer 404) and limits (--req_limit's
  // bucket, shared with LibreTranslate's routes) must outlive the API. timeout: how long one
  // translation may take.
  DeeplApi(const TranslatorService* service, GlossaryStore* glossaries, const LibreLimits* limits,
           absl::Duration timeout)
      : service_(service), glossaries_(glossaries), limits_(limits), timeout_(timeout) {}

  // A request for a path under /v2/.
  HttpResponse Handle(const HttpRequest& request) const;

 private:
  HttpResponse Translate(const HttpRequest& request) const;
  HttpResponse Glossaries(const HttpRequest& request) const;
  // Characters translated through /v2/translate by `client` (its name when the server has
  // named tokens, else every client together).
  void AddUsage(int client, int64_t characters) const;
  int64_t Usage(int client) const;
  std::string UsageKey(int client) const;

  const TranslatorService* service_;
  GlossaryStore* glossaries_;
  const LibreLimits* limits_;
  absl::Duration timeout_;
  mutable absl::Mutex mu_;
  mutable std::map<std::string, int64_t> usage_ ABSL_GUARDED_BY(mu_);
};

// The 403's message: no key, or not one of the server's tokens.
inline constexpr char kDeeplWrongKey[] =
    "Wrong key: send the header 'Authorization: DeepL-Auth-Key <key>' with one of this server's "
    "tokens.";

// {"message": message} with that status (DeepL's error shape).
HttpResponse DeeplError(int status, absl::string_view message);
// DeepL's status for an error: HttpStatusFor's, but OUT_OF_RANGE (a request too large) is 413.
int DeeplStatusFor(const absl::Status& status);
HttpResponse DeeplError(const absl::Status& status);
// The key of an "Authorization: DeepL-Auth-Key <key>" header ("" when there is none).
absl::string_view DeeplKey(absl::string_view authorization);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DEEPL_DEEPL_API_H_
