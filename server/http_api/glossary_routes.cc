// The HTTP API's stored glossaries, after DeepL's /v2/glossaries (bodies in protobuf's JSON
// mapping of the GlossaryService messages):
//   POST   /v1/glossaries                CreateGlossaryRequest -> 201 Created, GlossaryInfo
//                                         (507 Insufficient Storage when the store is full)
//   GET    /v1/glossaries                ListGlossariesResponse
//   GET    /v1/glossaries/<id>           GetGlossaryResponse (description and entries)
//   GET    /v1/glossaries/<id>/entries   the entries as TSV (text/tab-separated-values)
//   DELETE /v1/glossaries/<id>           204 No Content
// Each needs the server's bearer token when it has one; errors are {"error": "..."}.
#include <google/protobuf/util/json_util.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/glossaries/glossary_formats.h"
#include "server/grpc/glossary_service.h"
#include "server/http_api/http_api.h"

namespace glossa::server {
namespace {

constexpr absl::string_view kRoot = "/v1/glossaries";

// Every field, empty lists too ({"glossaries": []}), in protobuf's JSON mapping.
HttpResponse JsonAnswer(int status, const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!printed.ok()) return JsonError(500, std::string(printed.message()));
  return {status, "application/json", std::move(json)};
}

HttpResponse Create(GlossaryStore& store, const HttpRequest& http) {
  // A web page of another site can send text/plain or a form without asking first (no CORS
  // preflight), but not JSON: a stored change takes JSON only.
  if (!absl::StartsWithIgnoreCase(http.content_type, "application/json")) {
    return JsonError(415, "send the glossary as JSON (Content-Type: application/json)");
  }
  v1::CreateGlossaryRequest request;
  const auto parsed = google::protobuf::util::JsonStringToMessage(http.body, &request);
  if (!parsed.ok()) {
    return JsonError(400, absl::StrCat("the body is not a glossa.v1.CreateGlossaryRequest in "
                                       "protobuf's JSON mapping: ",
                                       std::string(parsed.message()).substr(0, 300)));
  }
  absl::StatusOr<v1::GlossaryInfo> info = store.Create(request);
  // A full store (too many glossaries, or too many bytes) is 507 Insufficient Storage (RFC 4918):
  // not 429, since waiting does not help, only deleting does.
  if (info.status().code() == absl::StatusCode::kResourceExhausted) {
    return JsonError(507, info.status().message());
  }
  if (!info.ok()) return JsonError(info.status());
  return JsonAnswer(201, *info);
}

HttpResponse List(const GlossaryStore& store) {
  v1::ListGlossariesResponse list;
  for (v1::GlossaryInfo& info : store.List()) *list.add_glossaries() = std::move(info);
  return JsonAnswer(200, list);
}

// GET, DELETE /v1/glossaries/<id> and GET /v1/glossaries/<id>/entries.
HttpResponse OneGlossary(GlossaryStore& store, const HttpRequest& http, absl::string_view id,
                         bool entries) {
  const bool get = http.method == "GET";
  if (!get && !(http.method == "DELETE" && !entries)) {
    return JsonError(405, absl::StrCat(http.method, " is not allowed on ", http.path));
  }
  if (http.method == "DELETE") {
    if (absl::Status deleted = store.Delete(id); !deleted.ok()) return JsonError(deleted);
    return {204, "text/plain", ""};
  }
  absl::StatusOr<std::shared_ptr<const Glossary>> glossary = store.Find(id);
  if (!glossary.ok()) return JsonError(glossary.status());
  if (entries) {
    return {200, "text/tab-separated-values; charset=utf-8", ToTsv((*glossary)->entries)};
  }
  return JsonAnswer(200, GlossaryResponse(**glossary));
}

}  // namespace

HttpResponse HttpApi::V1Glossaries(const HttpRequest& http) const {
  if (absl::Status auth = service_->CheckToken(BearerToken(http.authorization)); !auth.ok()) {
    return JsonError(absl::UnauthenticatedError(
        "this server requires a bearer token: send the header 'Authorization: Bearer <token>'"));
  }
  if (glossaries_ == nullptr) return JsonError(404, "this server keeps no glossaries");
  GlossaryStore& store = *glossaries_;
  const absl::string_view path = http.path;
  if (path == kRoot) {
    if (http.method == "POST") return Create(store, http);
    if (http.method == "GET") return List(store);
    return JsonError(405, absl::StrCat(http.method, " is not allowed on ", path));
  }
  // <id> or <id>/entries
  const std::vector<absl::string_view> parts = absl::StrSplit(path.substr(kRoot.size() + 1), '/');
  if (parts[0].empty() || parts.size() > 2 || (parts.size() == 2 && parts[1] != "entries")) {
    return JsonError(404, absl::StrCat("no such path: ", kRoot,
                                       " has /<glossary_id> and "
                                       "/<glossary_id>/entries"));
  }
  return OneGlossary(store, http, parts[0], parts.size() == 2);
}

}  // namespace glossa::server
