// The HTTP API's stored glossaries, after DeepL's /v2/glossaries (bodies in protobuf's JSON
// mapping of the GlossaryService messages):
//   POST   /v1/glossaries                CreateGlossaryRequest -> 201 Created, GlossaryInfo
//   GET    /v1/glossaries                ListGlossariesResponse
//   GET    /v1/glossaries/<id>           GetGlossaryResponse (description and entries)
//   GET    /v1/glossaries/<id>/entries   the entries as TSV (text/tab-separated-values)
//   DELETE /v1/glossaries/<id>           204 No Content
// Each needs the server's bearer token when it has one; errors are {"error": "..."}.
#ifndef GLOSSA_SERVER_HTTP_API_GLOSSARY_ROUTES_H_
#define GLOSSA_SERVER_HTTP_API_GLOSSARY_ROUTES_H_

#include "absl/strings/string_view.h"
#include "server/glossaries/glossary_store.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"

namespace glossa::server {

// Whether `path` is /v1/glossaries or below it.
bool IsGlossaryPath(absl::string_view path);

// Answers a request whose path IsGlossaryPath. service: the token; store: null answers 404 (the
// server keeps no glossaries).
HttpResponse HandleGlossaries(const TranslatorService& service, GlossaryStore* store,
                              const HttpRequest& request);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_API_GLOSSARY_ROUTES_H_
