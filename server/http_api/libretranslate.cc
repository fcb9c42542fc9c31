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
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// English names of the commonest codes; others are named by their code.
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

// The languages of the server's models, sources and targets: what detection chooses among.
std::set<std::string> ServerLanguages(const ModelRegistry& registry) {
  std::set<std::string> out;
  for (const auto& [name, entry] : registry.models()) {
    const ModelInfo& info = entry->model->info();
    if (!info.source_language.empty()) out.insert(info.source_language);
    if (!info.target_language.empty()) out.insert(info.target_language);
  }
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
    for (const auto& [name, entry] : registry.models()) {
      if (!entry->model->info().source_language.empty()) {
        fallback = entry->model->info().source_language;
        break;
      }
    }
    out.push_back({fallback, 0.0});
  }
  return out;
}

json ToJson(const DetectedLanguage& d) {
  return {{"confidence", d.confidence}, {"language", d.language}};
}

// The translation, in LibreTranslate's shape.
absl::StatusOr<std::string> Translate(const TranslatorService& service, const LibreRequest& r,
                                      const std::string& api_key, absl::Duration timeout,
                                      RpcRecord* record) {
  if (!service.CheckToken(api_key).ok()) {
    return absl::UnauthenticatedError("Invalid API key");
  }
  if (r.q.empty()) return Invalid("missing q parameter");
  if (r.source.empty()) return Invalid("missing source parameter");
  if (r.target.empty()) return Invalid("missing target parameter");
  const std::string format = r.format.empty() ? "text" : r.format;
  if (format != "text" && format != "html") {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForMessage(format), " format is not supported: use text or html"));
  }
  // "auto": the language of all the texts together (CLD2), whose model translates them all.
  std::optional<DetectedLanguage> detected;
  if (r.source == "auto") {
    auto detections = Detect(service.registry(), r.q);
    if (!detections.ok()) return detections.status();
    detected = detections->front();
  }
  const std::string& source = detected ? detected->language : r.source;
  auto model = ModelForPair(service.registry(), source, r.target);
  if (!model.ok()) return model.status();
  v1::TranslateRequest request;
  request.set_model((*model)->name);
  // format=html: the text nodes of every q are the texts; first[i] is q[i]'s first.
  std::vector<HtmlText> pages;
  std::vector<int> first;
  for (size_t i = 0; i < r.q.size(); ++i) {
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
  request.set_glossary_id(r.glossary_id);
  for (const auto& [term, targets] : r.glossary) {
    v1::GlossaryEntry* entry = request.add_glossary();
    entry->set_source(term);
    for (const std::string& target : targets) entry->add_targets(target);
  }
  if (r.alternatives > 0) {
    const int n = r.alternatives + 1;
    request.mutable_options()->set_num_hypotheses(n);
    request.mutable_options()->set_beam_size(
        std::max(n, (*model)->engine->options().default_beam_size));
  }
  auto response = TranslateAndWait(service, request, timeout, record);
  if (!response.ok()) return response.status();
  json texts = json::array(), alternatives = json::array();
  for (size_t i = 0; i < r.q.size(); ++i) {
    std::vector<std::string> hypotheses = format == "text"
                                              ? Texts(response->translations(static_cast<int>(i)))
                                              : HtmlTexts(r.q[i], pages[i], *response, first[i]);
    texts.push_back(hypotheses.front());
    alternatives.push_back(
        json(std::vector<std::string>(hypotheses.begin() + 1, hypotheses.end())));
  }
  json out;
  out["translatedText"] = r.batch ? texts : texts[0];
  if (r.alternatives > 0) out["alternatives"] = r.batch ? alternatives : alternatives[0];
  if (detected) {
    out["detectedLanguage"] =
        r.batch ? json(std::vector<json>(r.q.size(), ToJson(*detected))) : ToJson(*detected);
  }
  return Dump(out);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const LoadedModel>> ModelForPair(const ModelRegistry& registry,
                                                                absl::string_view source,
                                                                absl::string_view target) {
  bool known_source = false, known_target = false;
  for (const auto& [name, entry] : registry.models()) {
    const ModelInfo& info = entry->model->info();
    if (info.source_language == source && info.target_language == target) return entry;
    known_source |= info.source_language == source;
    known_target |= info.target_language == target;
  }
  if (!known_source) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(source), " is not supported"));
  }
  if (!known_target) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(target), " is not supported"));
  }
  return absl::InvalidArgumentError(absl::StrCat(QuoteForMessage(target),
                                                 " is not available as a target language from ",
                                                 QuoteForMessage(source)));
}

HttpResponse LibreTranslate(const TranslatorService& service, const HttpRequest& http,
                            absl::Duration timeout) {
  RpcRecord record(service.metrics(), Method::kHttpTranslate);
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    auto request = ParseLibreRequest(http);
    if (!request.ok()) return request.status();
    const std::string api_key =
        request->api_key.empty() ? std::string(BearerToken(http.authorization)) : request->api_key;
    return Translate(service, *request, api_key, timeout, &record);
  }();
  record.Finish(ToGrpcStatus(body.status()));
  if (!body.ok()) return JsonError(body.status());
  return {200, "application/json", *std::move(body)};
}

HttpResponse LibreLanguages(const TranslatorService& service) {
  RpcRecord record(service.metrics(), Method::kHttpLanguages);
  std::map<std::string, std::set<std::string>> targets;  // every language, sources and targets
  for (const auto& [name, entry] : service.registry().models()) {
    const ModelInfo& info = entry->model->info();
    if (info.source_language.empty() || info.target_language.empty()) continue;
    targets[info.source_language].insert(info.target_language);
    targets[info.target_language];
  }
  json out = json::array();
  for (const auto& [code, to] : targets) {
    out.push_back({{"code", code}, {"name", LanguageName(code)}, {"targets", to}});
  }
  record.Finish(grpc::Status::OK);
  return {200, "application/json", Dump(out)};
}

HttpResponse LibreDetect(const TranslatorService& service, const HttpRequest& http) {
  RpcRecord record(service.metrics(), Method::kHttpDetect);
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    auto request = ParseLibreRequest(http);
    if (!request.ok()) return request.status();
    const std::string api_key =
        request->api_key.empty() ? std::string(BearerToken(http.authorization)) : request->api_key;
    if (!service.CheckToken(api_key).ok()) return absl::UnauthenticatedError("Invalid API key");
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
