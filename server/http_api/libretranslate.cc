#include "server/http_api/libretranslate.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/text/html_text.h"
#include "server/http_api/http_api.h"
#include "server/text/language_detector.h"
#include "server/common/status_util.h"
#include "server/models/router.h"
#include "server/request/routing.h"
#include "text/languages.h"
#include "text/tokenizer.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

absl::Status CheckLibreRate(const TranslatorService& service, const HttpRequest& http, int client,
                            const LibreLimits& limits) {
  if (limits.requests == nullptr) return absl::OkStatus();
  const std::string key = client > 0
                              ? absl::StrCat("client ", service.clients().name(client))
                              : absl::StrCat("address ", http.remote_address);
  if (limits.requests->Allow(key, absl::Now())) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("Slowdown: ", limits.requests->per_minute(), " per 1 minute"));
}

absl::Status CheckLibrePair(const TranslatorService& service, const std::string& source,
                            const std::string& target) {
  const CardMap models = service.registry().cards();
  const auto route = RouteLanguages(models, source, target, service.pivot_language());
  if (route.ok()) return absl::OkStatus();
  if (SourceLanguagesOf(models).count(Iso639_1(source)) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(source), " is not supported"));
  }
  if (TargetLanguagesOf(models).count(Iso639_1(target)) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(target), " is not supported"));
  }
  return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(target),
                                                 " is not available as a target language from ",
                                                 QuoteForMessage(source)));
}

std::string LanguageName(const std::string& code) {
  static const std::map<std::string, std::string> kNames = {
      {"ar", "Arabic"},   {"bg", "Bulgarian"}, {"ca", "Catalan"},    {"cs", "Czech"},
      {"da", "Danish"},   {"de", "German"},    {"el", "Greek"},      {"en", "English"},
      {"es", "Spanish"},  {"et", "Estonian"},  {"eu", "Basque"},     {"fi", "Finnish"},
      {"fr", "French"},   {"ga", "Irish"},     {"gl", "Galician"},   {"he", "Hebrew"},
      {"hi", "Hindi"},    {"hu", "Hungarian"}, {"id", "Indonesian"}, {"it", "Italian"},
      {"ja", "Japanese"}, {"ko", "Korean"},    {"lt", "Lithuanian"}, {"lv", "Latvian"},
      {"nl", "Dutch"},    {"pl", "Polish"},    {"pt", "Portuguese"}, {"ro", "Romanian"},
      {"ru", "Russian"},  {"sk", "Slovak"},    {"sl", "Slovenian"},  {"sv", "Swedish"},
      {"tr", "Turkish"},  {"uk", "Ukrainian"}, {"vi", "Vietnamese"}, {"zh", "Chinese"}};
  auto it = kNames.find(code);
  return it == kNames.end() ? code : it->second;
}

namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid request: ", what));
}

std::vector<std::string> Texts(const v1::Translation& t) {
  std::vector<std::string> out;
  for (const v1::Hypothesis& h : t.hypotheses()) out.push_back(h.text());
  if (out.empty()) out.emplace_back();
  return out;
}

// Hypothesis k of an HTML text: its text nodes' hypotheses k (a node's last when it has fewer)
// written back into the HTML.
std::vector<std::string> HtmlTexts(absl::string_view html, const HtmlText& nodes,
                                   const v1::TranslateResponse& response, int first) {
  std::vector<std::vector<std::string>> node_texts;
  size_t n = 1;
  for (size_t j = 0; j < nodes.texts.size(); ++j) {
    node_texts.push_back(Texts(response.translations(first + static_cast<int>(j))));
    n = std::max(n, node_texts.back().size());
  }
  std::vector<std::string> out;
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::string> translations;
    for (const auto& texts : node_texts)
      translations.push_back(texts[std::min(k, texts.size() - 1)]);
    out.push_back(ReplaceHtmlText(html, nodes, translations));
  }
  return out;
}

// The languages of the server's models, sources and targets: what /detect chooses among.
std::set<std::string> ServerLanguages(const ModelRegistry& registry) {
  const CardMap models = registry.cards();
  std::set<std::string> out = SourceLanguagesOf(models);
  for (const std::string& code : TargetLanguagesOf(models)) out.insert(code);
  return out;
}

// The languages of the texts together, among the server's, most likely first. As LibreTranslate
// does, never empty: when none is found, the server's first source language with confidence 0.
absl::StatusOr<std::vector<DetectedLanguage>> Detect(const ModelRegistry& registry,
                                                     const std::vector<std::string>& texts) {
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!IsValidUtf8(texts[i])) {
      return absl::InvalidArgumentError(absl::StrCat("q ", i, " is not valid UTF-8"));
    }
  }
  const std::set<std::string> known = ServerLanguages(registry);
  std::vector<DetectedLanguage> out;
  for (DetectedLanguage& d : DetectLanguages(absl::StrJoin(texts, "\n"))) {
    if (known.count(d.language) > 0) out.push_back(std::move(d));
  }
  if (out.empty()) {
    std::string fallback = known.empty() ? "en" : *known.begin();
    for (const auto& [name, card] : registry.cards()) {
      if (!card->info.source_language.empty()) {
        fallback = card->info.source_language;
        break;
      }
    }
    out.push_back({fallback, 0.0});
  }
  return out;
}

// Code points of valid UTF-8 (Python's len(), as LibreTranslate counts).
int64_t Characters(absl::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// LibreTranslate's --batch-limit and --char-limit, with its wording.
absl::Status CheckSizes(const LibreRequest& r, const LibreLimits& limits) {
  const int64_t items = static_cast<int64_t>(r.q.size());
  if (r.batch && limits.batch_limit >= 0 && items > limits.batch_limit) {
    return Invalid(absl::StrCat("request (", items, ") exceeds text limit (", limits.batch_limit,
                                ")"));
  }
  if (limits.char_limit < 0) return absl::OkStatus();
  for (const std::string& text : r.q) {
    const int64_t n = Characters(text);
    if (n > limits.char_limit) {
      return Invalid(absl::StrCat("request (", n, ") exceeds text limit (", limits.char_limit, ")"));
    }
  }
  return absl::OkStatus();
}

// The beam that alternatives start from: the first model's default (--default_beam_size).
int DefaultBeam(const ModelRegistry& registry) {
  const CardMap models = registry.cards();
  return models.empty() ? 4 : models.begin()->second->spec.engine_options.default_beam_size;
}

json ToJson(const DetectedLanguage& d) {
  return {{"confidence", d.confidence}, {"language", d.language}};
}

// The text detection reads of q item i: the item, or its HTML's text nodes.
absl::StatusOr<std::string> DetectableText(const std::string& q, const std::string& format) {
  if (format == "text") return q;
  auto page = ExtractHtmlText(q);
  if (!page.ok()) return page.status();
  std::vector<std::string> plain;
  for (const std::string& text : page->texts) plain.push_back(PlainText(text));
  return absl::StrJoin(plain, "\n");
}

// "auto": each q item's language, among those the server translates into `target` from.
absl::StatusOr<std::vector<DetectedLanguage>> DetectItems(const TranslatorService& service,
                                                          const LibreRequest& r,
                                                          const std::string& format) {
  const std::set<std::string> candidates =
      AutoCandidates(service.registry(), "", r.target, service.pivot_language());
  if (candidates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(r.target), " is not supported"));
  }
  std::vector<DetectedLanguage> out;
  for (size_t i = 0; i < r.q.size(); ++i) {
    if (!IsValidUtf8(r.q[i])) {
      return absl::InvalidArgumentError(absl::StrCat("q ", i, " is not valid UTF-8"));
    }
    auto text = DetectableText(r.q[i], format);
    if (!text.ok()) return text.status();
    auto detected = DetectAmong(*text, candidates);
    if (!detected.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.batch ? absl::StrCat("q ", i, ": ") : std::string(), detected.status().message()));
    }
    out.push_back(*std::move(detected));
  }
  return out;
}

// q items `items`, all in `source`, translated in one request: each item's hypotheses.
absl::StatusOr<std::vector<std::vector<std::string>>> TranslateItems(
    const TranslatorService& service, const LibreRequest& r, const std::vector<size_t>& items,
    const std::string& source, const std::string& format, absl::Duration timeout,
    RpcRecord* record) {
  GLOSSA_RETURN_IF_ERROR(CheckLibrePair(service, source, r.target));
  v1::TranslateRequest request;
  // format=html: the text nodes of every q are the texts; first[k] is item k's first.
  std::vector<HtmlText> pages;
  std::vector<int> first;
  for (size_t i : items) {
    if (format == "text") {
      request.add_texts(r.q[i]);
      continue;
    }
    auto page = ExtractHtmlText(r.q[i]);
    if (!page.ok()) {
      return absl::Status(page.status().code(),
                          absl::StrCat("q ", i, ": ", page.status().message()));
    }
    first.push_back(request.texts_size());
    for (const std::string& text : page->texts) request.add_texts(text);
    pages.push_back(*std::move(page));
  }
  request.set_source_language(source);
  request.set_target_language(r.target);
  request.set_split_sentences(true);  // documents, sentence by sentence, spacing kept
  request.set_inline_tags(format != "text" && std::any_of(request.texts().begin(),
                                                          request.texts().end(), HasMarkup));
  request.set_glossary_id(r.glossary_id);
  for (const auto& [term, targets] : r.glossary) {
    v1::GlossaryEntry* entry = request.add_glossary();
    entry->set_source(term);
    for (const std::string& target : targets) entry->add_targets(target);
  }
  if (r.alternatives > 0) {
    const int n = r.alternatives + 1;
    request.mutable_options()->set_num_hypotheses(n);
    request.mutable_options()->set_beam_size(std::max(n, DefaultBeam(service.registry())));
  }
  auto response = TranslateAndWait(service, request, timeout, record);
  if (!response.ok()) return response.status();
  std::vector<std::vector<std::string>> out;
  for (size_t k = 0; k < items.size(); ++k) {
    out.push_back(format == "text"
                      ? Texts(response->translations(static_cast<int>(k)))
                      : HtmlTexts(r.q[items[k]], pages[k], *response, first[k]));
  }
  return out;
}

// The translation, in LibreTranslate's shape. "auto": each q item's language is detected (CLD2,
// among the languages the server translates into the target from) and reported per item; items
// of one language are translated in one request.
absl::StatusOr<std::string> Translate(const TranslatorService& service, const LibreRequest& r,
                                      const std::string& api_key, absl::Duration timeout,
                                      const LibreLimits& limits, RpcRecord* record) {
  if (!service.CheckToken(api_key).ok()) {
    return absl::UnauthenticatedError("Invalid API key");
  }
  if (r.q.empty()) return Invalid("missing q parameter");
  if (r.source.empty()) return Invalid("missing source parameter");
  if (r.target.empty()) return Invalid("missing target parameter");
  GLOSSA_RETURN_IF_ERROR(CheckSizes(r, limits));
  const std::string format = r.format.empty() ? "text" : r.format;
  if (format != "text" && format != "html") {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForMessage(format), " format is not supported: use text or html"));
  }
  std::vector<DetectedLanguage> detected;
  if (r.source == "auto") {
    GLOSSA_ASSIGN_OR_RETURN(detected, DetectItems(service, r, format));
  }
  // The items of each source language, in order of first appearance.
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  for (size_t i = 0; i < r.q.size(); ++i) {
    const std::string& source = detected.empty() ? r.source : detected[i].language;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == source; });
    if (it == groups.end()) it = groups.insert(groups.end(), {source, {}});
    it->second.push_back(i);
  }
  std::vector<std::vector<std::string>> hypotheses(r.q.size());
  for (const auto& [source, items] : groups) {
    GLOSSA_ASSIGN_OR_RETURN(auto translated,
                            TranslateItems(service, r, items, source, format, timeout, record));
    for (size_t k = 0; k < items.size(); ++k) hypotheses[items[k]] = std::move(translated[k]);
  }
  json texts = json::array(), alternatives = json::array(), languages = json::array();
  for (size_t i = 0; i < r.q.size(); ++i) {
    texts.push_back(hypotheses[i].front());
    alternatives.push_back(
        json(std::vector<std::string>(hypotheses[i].begin() + 1, hypotheses[i].end())));
    if (!detected.empty()) languages.push_back(ToJson(detected[i]));
  }
  json out;
  out["translatedText"] = r.batch ? texts : texts[0];
  if (r.alternatives > 0) out["alternatives"] = r.batch ? alternatives : alternatives[0];
  if (!detected.empty()) out["detectedLanguage"] = r.batch ? languages : languages[0];
  return Dump(out);
}

}  // namespace

HttpResponse LibreTranslate(const TranslatorService& service, const HttpRequest& http,
                            absl::Duration timeout, const LibreLimits& limits) {
  RpcRecord record(service.metrics(), Method::kHttpTranslate);
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    auto request = ParseLibreRequest(http);
    if (!request.ok()) return request.status();
    const std::string api_key =
        request->api_key.empty() ? std::string(BearerToken(http.authorization)) : request->api_key;
    const absl::StatusOr<int> client = service.Identify(api_key, &record);
    if (!client.ok()) return absl::UnauthenticatedError("Invalid API key");
    GLOSSA_RETURN_IF_ERROR(CheckLibreRate(service, http, *client, limits));
    return Translate(service, *request, api_key, timeout, limits, &record);
  }();
  record.Finish(ToGrpcStatus(body.status()));
  if (!body.ok()) return JsonError(body.status());
  return {200, "application/json", *std::move(body)};
}

HttpResponse LibreLanguages(const TranslatorService& service) {
  RpcRecord record(service.metrics(), Method::kHttpLanguages);
  // Every language, sources and targets; a source's targets are those it is routed into,
  // directly or through the pivot language.
  const LanguagePairs pairs = PairsOf(service.registry().cards(), service.pivot_language());
  std::map<std::string, std::set<std::string>> targets = pairs.direct;
  for (const auto& [source, to] : pairs.direct) {
    for (const std::string& target : to) targets[target];
  }
  for (const auto& [source, to] : pairs.pivoted) targets[source].insert(to.begin(), to.end());
  json out = json::array();
  for (const auto& [code, to] : targets) {
    out.push_back({{"code", code}, {"name", LanguageName(code)}, {"targets", to}});
  }
  record.Finish(grpc::Status::OK);
  return {200, "application/json", Dump(out)};
}

HttpResponse LibreDetect(const TranslatorService& service, const HttpRequest& http,
                         const LibreLimits& limits) {
  RpcRecord record(service.metrics(), Method::kHttpDetect);
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    auto request = ParseLibreRequest(http);
    if (!request.ok()) return request.status();
    const std::string api_key =
        request->api_key.empty() ? std::string(BearerToken(http.authorization)) : request->api_key;
    const absl::StatusOr<int> client = service.Identify(api_key, &record);
    if (!client.ok()) return absl::UnauthenticatedError("Invalid API key");
    GLOSSA_RETURN_IF_ERROR(CheckLibreRate(service, http, *client, limits));
    if (request->q.empty()) return Invalid("missing q parameter");
    auto detections = Detect(service.registry(), request->q);
    if (!detections.ok()) return detections.status();
    json out = json::array();
    for (const DetectedLanguage& d : *detections) out.push_back(ToJson(d));
    return Dump(out);
  }();
  record.Finish(ToGrpcStatus(body.status()));
  if (!body.ok()) return JsonError(body.status());
  return {200, "application/json", *std::move(body)};
}

}  // namespace glossa::server
