// DeepL's /v2/glossaries over the server's GlossaryStore (the one /v1/glossaries and gRPC's
// GlossaryService keep):
//   POST   /v2/glossaries               name, source_lang, target_lang, entries,
//                                       entries_format (tsv, the default, or csv), as form
//                                       fields or JSON -> 201, the glossary's description
//                                       (456 when the store is full)
//   GET    /v2/glossaries               {"glossaries": [...]}
//   GET    /v2/glossaries/<id>          {"glossary_id", "name", "ready", "source_lang",
//                                       "target_lang", "creation_time", "entry_count"}
//   GET    /v2/glossaries/<id>/entries  the entries as TSV (text/tab-separated-values)
//   DELETE /v2/glossaries/<id>          204
// A glossary's languages are a pair the server translates (GET /v2/glossary-language-pairs).
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/deepl/deepl_api.h"
#include "server/deepl/deepl_languages.h"
#include "server/deepl/deepl_request.h"
#include "server/glossaries/glossary_formats.h"
#include "text/languages.h"

namespace glossa::server {
namespace {

using json = nlohmann::ordered_json;  // DeepL's order of fields

constexpr absl::string_view kRoot = "/v2/glossaries";

// A stored language as DeepL writes a glossary's: "es"; "spa_Latn" -> "es".
std::string GlossaryLanguage(const std::string& code) {
  return absl::AsciiStrToLower(DeeplCode(Iso639_1(code.substr(0, code.find('_')))));
}

json GlossaryJson(const v1::GlossaryInfo& info) {
  return {{"glossary_id", info.glossary_id()},
          {"name", info.name()},
          {"ready", true},
          {"source_lang", GlossaryLanguage(info.source_language())},
          {"target_lang", GlossaryLanguage(info.target_language())},
          {"creation_time", info.creation_time()},
          {"entry_count", info.entry_count()}};
}

HttpResponse JsonAnswer(int status, const json& body) {
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

HttpResponse Create(const TranslatorService& service, GlossaryStore& store,
                    const HttpRequest& http) {
  // A web page of another site can post a form without asking first (no CORS preflight), but
  // not with an Authorization header: a stored change from a form needs the header, as every
  // DeepL client sends it.
  const bool json_body = absl::StartsWithIgnoreCase(http.content_type, "application/json");
  if (!json_body && http.authorization.empty()) {
    return DeeplError(403, kDeeplWrongKey);
  }
  auto fields = ParseDeeplFields(http.content_type, http.body, http.query);
  if (!fields.ok()) return DeeplError(fields.status());
  v1::CreateGlossaryRequest request;
  for (const char* name : {"name", "source_lang", "target_lang", "entries"}) {
    if (FieldValue(*fields, name).empty()) {
      return DeeplError(400, absl::StrCat("Parameter '", name, "' not specified."));
    }
  }
  const std::string source = FieldValue(*fields, "source_lang");
  const std::string target = FieldValue(*fields, "target_lang");
  std::string format = absl::AsciiStrToLower(FieldValue(*fields, "entries_format"));
  if (format.empty()) format = "tsv";
  if (format != "tsv" && format != "csv") {
    return DeeplError(400, "Value for 'entries_format' not supported.");
  }
  if (!IsDeeplGlossaryPair(service, source, target)) {
    return DeeplError(400, "Unsupported glossary source and target language pair.");
  }
  request.set_name(FieldValue(*fields, "name"));
  request.set_source_language(absl::AsciiStrToLower(source));
  request.set_target_language(absl::AsciiStrToLower(target));
  request.set_entries_text(FieldValue(*fields, "entries"));
  request.set_entries_format(format);
  absl::StatusOr<v1::GlossaryInfo> info = store.Create(request);
  if (info.status().code() == absl::StatusCode::kResourceExhausted) {
    return DeeplError(456, info.status().message());
  }
  if (!info.ok()) return DeeplError(info.status());
  return JsonAnswer(201, GlossaryJson(*info));
}

// GET, DELETE /v2/glossaries/<id> and GET /v2/glossaries/<id>/entries.
HttpResponse OneGlossary(GlossaryStore& store, const HttpRequest& http, absl::string_view id,
                         bool entries) {
  if (http.method == "DELETE" && !entries) {
    if (absl::Status deleted = store.Delete(id); !deleted.ok()) return DeeplError(deleted);
    return {204, "text/plain", ""};
  }
  if (http.method != "GET") {
    return DeeplError(405, absl::StrCat(http.method, " is not allowed on ", http.path, "."));
  }
  absl::StatusOr<std::shared_ptr<const Glossary>> glossary = store.Find(id);
  if (!glossary.ok()) return DeeplError(glossary.status());
  if (entries) {
    return {200, "text/tab-separated-values; charset=utf-8", ToTsv((*glossary)->entries)};
  }
  return JsonAnswer(200, GlossaryJson((*glossary)->info));
}

}  // namespace

HttpResponse DeeplApi::Glossaries(const HttpRequest& http) const {
  if (glossaries_ == nullptr) return DeeplError(404, "This server keeps no glossaries.");
  GlossaryStore& store = *glossaries_;
  const absl::string_view path = http.path;
  if (path == kRoot) {
    if (http.method == "POST") return Create(*service_, store, http);
    if (http.method != "GET") {
      return DeeplError(405, absl::StrCat(http.method, " is not allowed on ", path, "."));
    }
    json list = json::array();
    for (const v1::GlossaryInfo& info : store.List()) list.push_back(GlossaryJson(info));
    return JsonAnswer(200, json{{"glossaries", list}});
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(path.substr(kRoot.size() + 1), '/');
  if (parts[0].empty() || parts.size() > 2 || (parts.size() == 2 && parts[1] != "entries")) {
    return DeeplError(404, "No such path: /v2/glossaries has /<glossary_id> and "
                           "/<glossary_id>/entries.");
  }
  return OneGlossary(store, http, parts[0], parts.size() == 2);
}

}  // namespace glossa::server
