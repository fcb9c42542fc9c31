#include "server/deepl/deepl_api.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/deepl/deepl_languages.h"
#include "server/deepl/deepl_request.h"
#include "server/http_api/http_api.h"

namespace glossa::server {
namespace {

using json = nlohmann::json;

// What a client may spend: no quota is kept, so a number no client reaches.
constexpr int64_t kCharacterLimit = 1'000'000'000'000;

HttpResponse JsonOk(std::string body) { return {200, "application/json", std::move(body)}; }

HttpResponse NotAllowed(const HttpRequest& http) {
  return DeeplError(405, absl::StrCat(http.method, " is not allowed on ", http.path, "."));
}

// GET|POST /v2/languages?type=source|target.
HttpResponse Languages(const TranslatorService& service, const HttpRequest& http) {
  const bool post = http.method == "POST";
  if (http.method != "GET" && !post) return NotAllowed(http);
  auto fields = ParseDeeplFields(http.content_type, post ? http.body : "", http.query);
  if (!fields.ok()) return DeeplError(fields.status());
  const std::string type = absl::AsciiStrToLower(FieldValue(*fields, "type"));
  if (!type.empty() && type != "source" && type != "target") {
    return DeeplError(400, "Parameter 'type' is invalid. 'source' and 'target' are valid values.");
  }
  return JsonOk(DeeplLanguagesJson(service, type == "target"));
}

}  // namespace

HttpResponse DeeplError(int status, absl::string_view message) {
  const json body = {{"message", std::string(message)}};
  // Messages may quote client bytes: anything that is not UTF-8 becomes U+FFFD.
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

int DeeplStatusFor(const absl::Status& status) {
  return status.code() == absl::StatusCode::kOutOfRange ? 413 : HttpStatusFor(status);
}

HttpResponse DeeplError(const absl::Status& status) {
  return DeeplError(DeeplStatusFor(status), status.message());
}

absl::string_view DeeplKey(absl::string_view authorization) {
  constexpr absl::string_view kScheme = "DeepL-Auth-Key ";
  if (!absl::StartsWithIgnoreCase(authorization, kScheme)) return "";
  return absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
}

HttpResponse DeeplApi::Handle(const HttpRequest& http) const {
  const std::string& path = http.path;
  if (path == "/v2/translate") return Translate(http);  // checks the key with its record
  if (!service_->CheckToken(DeeplKey(http.authorization)).ok()) {
    return DeeplError(403, kDeeplWrongKey);
  }
  if (path == "/v2/languages") return Languages(*service_, http);
  if (path == "/v2/usage") {
    if (http.method != "GET" && http.method != "POST") return NotAllowed(http);
    const int client = service_->Identify(DeeplKey(http.authorization)).value_or(0);
    const json usage = {{"character_count", Usage(client)},
                        {"character_limit", kCharacterLimit}};
    return JsonOk(usage.dump());
  }
  if (path == "/v2/glossary-language-pairs") {
    if (http.method != "GET") return NotAllowed(http);
    return JsonOk(DeeplGlossaryPairsJson(*service_));
  }
  if (path == "/v2/glossaries" || absl::StartsWith(path, "/v2/glossaries/")) {
    return Glossaries(http);
  }
  if (path == "/v2/document" || absl::StartsWith(path, "/v2/document/")) {
    return DeeplError(501,
                      "Document translation is not part of this server's DeepL API: translate "
                      "documents with LibreTranslate's POST /translate_file or gRPC's "
                      "TranslateDocument.");
  }
  return DeeplError(404,
                    "No such path: this server's DeepL API has POST /v2/translate, "
                    "/v2/languages, /v2/usage, GET /v2/glossary-language-pairs and "
                    "/v2/glossaries.");
}

std::string DeeplApi::UsageKey(int client) const {
  return client > 0 ? std::string(service_->clients().name(client)) : std::string();
}

void DeeplApi::AddUsage(int client, int64_t characters) const {
  absl::MutexLock lock(&mu_);
  usage_[UsageKey(client)] += characters;
}

int64_t DeeplApi::Usage(int client) const {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(UsageKey(client));
  return it == usage_.end() ? 0 : it->second;
}

}  // namespace glossa::server
