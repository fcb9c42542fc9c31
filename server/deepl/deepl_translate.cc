// POST /v2/translate: each text translated through the service as gRPC's Translate translates
// it (split_sentences, inline_tags for markup, glossary_id). tag_handling=html cuts a text into
// runs as LibreTranslate's format=html does (server/text/html_text.h), tag_handling=xml as
// server/text/xml_text.h does; the runs of every text go in one request. Without source_lang
// each text's language is detected (its text without markup) among the languages the server
// translates into the target, and the texts of each language go in one request, as gRPC groups
// them for "auto".
#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_util.h"
#include "server/deepl/deepl_api.h"
#include "server/deepl/deepl_languages.h"
#include "server/deepl/deepl_request.h"
#include "server/http_api/http_api.h"
#include "server/request/routing.h"
#include "server/text/html_text.h"
#include "server/text/language_detector.h"
#include "server/text/xml_text.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

using json = nlohmann::ordered_json;  // DeepL's order of fields

bool IsBlank(absl::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

// Each text's runs, for tag_handling html and xml (none without).
absl::StatusOr<std::vector<HtmlText>> MarkupRuns(const DeeplRequest& r) {
  std::vector<HtmlText> out;
  if (r.tag_handling.empty()) return out;
  XmlTextOptions xml;
  xml.ignore_tags = r.ignore_tags;
  xml.splitting_tags = r.splitting_tags;
  xml.non_splitting_tags = r.non_splitting_tags;
  xml.outline_detection = r.outline_detection;
  std::set<std::string> html_ignore;  // HTML's names are lower-case
  for (const std::string& tag : r.ignore_tags) html_ignore.insert(absl::AsciiStrToLower(tag));
  for (size_t i = 0; i < r.texts.size(); ++i) {
    auto page = r.tag_handling == "html" ? ExtractHtmlText(r.texts[i], html_ignore)
                                         : ExtractXmlText(r.texts[i], xml);
    if (!page.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Parameter 'text' (", i, "): ", page.status().message()));
    }
    out.push_back(*std::move(page));
  }
  return out;
}

// The text language detection reads: the text, or its runs without their markup.
std::string DetectableText(const DeeplRequest& r, const std::vector<HtmlText>& pages, size_t i) {
  if (pages.empty()) return r.texts[i];
  std::vector<std::string> plain;
  for (const std::string& text : pages[i].texts) plain.push_back(PlainText(text));
  return absl::StrJoin(plain, "\n");
}

// Each text's source language: the pair's, or detected (a blank text takes the first text's).
absl::StatusOr<std::vector<std::string>> Sources(const TranslatorService& service,
                                                 const DeeplRequest& r, const DeeplPair& pair,
                                                 const std::vector<HtmlText>& pages) {
  std::vector<std::string> out(r.texts.size(), pair.source);
  if (!pair.source.empty()) return out;
  const std::set<std::string> candidates =
      AutoCandidates(service.registry(), "", pair.target, service.pivot_language());
  std::string first;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const std::string text = DetectableText(r, pages, i);
    if (IsBlank(text)) continue;
    auto detected = DetectAmong(text, candidates);
    if (!detected.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Parameter 'text' (", i, "): ", detected.status().message(),
                       " Give source_lang."));
    }
    out[i] = detected->language;
    if (first.empty()) first = out[i];
  }
  if (first.empty()) first = candidates.empty() ? pair.target : *candidates.begin();
  for (std::string& source : out) {
    if (source.empty()) source = first;
  }
  return out;
}

// The best hypothesis of translation k.
std::string Best(const v1::TranslateResponse& response, int k) {
  const v1::Translation& t = response.translations(k);
  return t.hypotheses_size() == 0 ? std::string() : t.hypotheses(0).text();
}

// Texts `items`, all from `source`, in one request: each one's translation.
absl::StatusOr<std::vector<std::string>> TranslateGroup(
    const TranslatorService& service, const DeeplRequest& r, const std::vector<HtmlText>& pages,
    const std::vector<size_t>& items, const std::string& source, const std::string& target,
    absl::Duration timeout, RpcRecord* record) {
  v1::TranslateRequest request;
  std::vector<int> first;
  for (size_t i : items) {
    first.push_back(request.texts_size());
    if (pages.empty()) {
      request.add_texts(r.texts[i]);
    } else {
      for (const std::string& text : pages[i].texts) request.add_texts(text);
    }
  }
  request.set_source_language(source);
  request.set_target_language(target);
  request.set_split_sentences(r.split_sentences != "0");
  request.set_inline_tags(!pages.empty() && std::any_of(request.texts().begin(),
                                                        request.texts().end(), HasMarkup));
  request.set_glossary_id(r.glossary_id);
  v1::TranslateResponse response;
  if (request.texts_size() > 0) {
    GLOSSA_ASSIGN_OR_RETURN(response, TranslateAndWait(service, request, timeout, record));
  }
  std::vector<std::string> out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (pages.empty()) {
      out.push_back(Best(response, first[k]));
      continue;
    }
    const HtmlText& page = pages[items[k]];
    std::vector<std::string> runs;
    for (size_t j = 0; j < page.texts.size(); ++j) {
      runs.push_back(Best(response, first[k] + static_cast<int>(j)));
    }
    out.push_back(ReplaceHtmlText(r.texts[items[k]], page, runs));
  }
  return out;
}

// The answer to a parsed request; `billed` gets the characters translated.
absl::StatusOr<std::string> TranslateTexts(const TranslatorService& service,
                                           const DeeplRequest& r, absl::Duration timeout,
                                           RpcRecord* record, int64_t* billed) {
  if (!r.glossary_id.empty() && r.source_lang.empty()) {
    return absl::InvalidArgumentError(
        "Use of a glossary requires the source_lang parameter to be specified.");
  }
  GLOSSA_ASSIGN_OR_RETURN(const DeeplPair pair,
                          ResolveDeeplPair(service, r.source_lang, r.target_lang));
  // No model takes a formality: DeepL's answer for a target language without one.
  if (r.formality != "default" && r.formality != "prefer_more" && r.formality != "prefer_less") {
    return absl::InvalidArgumentError("'formality' is not supported for given 'target_lang'.");
  }
  GLOSSA_ASSIGN_OR_RETURN(const std::vector<HtmlText> pages, MarkupRuns(r));
  GLOSSA_ASSIGN_OR_RETURN(const std::vector<std::string> sources,
                          Sources(service, r, pair, pages));
  // The texts of each source language, in order of first appearance.
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == sources[i]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {sources[i], {}});
    it->second.push_back(i);
  }
  std::vector<std::string> translated(r.texts.size());
  for (const auto& [source, items] : groups) {
    GLOSSA_ASSIGN_OR_RETURN(auto texts, TranslateGroup(service, r, pages, items, source,
                                                       pair.target, timeout, record));
    for (size_t k = 0; k < items.size(); ++k) translated[items[k]] = std::move(texts[k]);
  }
  json translations = json::array();
  *billed = 0;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const std::string detected =
        r.source_lang.empty() ? DeeplCode(sources[i]) : absl::AsciiStrToUpper(r.source_lang);
    json t = {{"detected_source_language", detected}, {"text", translated[i]}};
    const int64_t characters = CodePoints(r.texts[i]);
    if (r.show_billed_characters) t["billed_characters"] = characters;
    *billed += characters;
    translations.push_back(std::move(t));
  }
  return json{{"translations", translations}}.dump(-1, ' ', false,
                                                   json::error_handler_t::replace);
}

}  // namespace

HttpResponse DeeplApi::Translate(const HttpRequest& http) const {
  if (http.method != "POST") {
    return DeeplError(405, "Use POST for /v2/translate, with the parameters in the body.");
  }
  RpcRecord record(service_->metrics(), Method::kHttpV2Translate);
  int client = 0;
  int64_t billed = 0;
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    const absl::StatusOr<int> id = service_->Identify(DeeplKey(http.authorization), &record);
    if (!id.ok()) return absl::UnauthenticatedError(kDeeplWrongKey);
    client = *id;
    GLOSSA_RETURN_IF_ERROR(CheckLibreRate(*service_, http, client, *limits_));
    GLOSSA_ASSIGN_OR_RETURN(const DeeplRequest request,
                            ParseDeeplRequest(http.content_type, http.body, http.query));
    return TranslateTexts(*service_, request, timeout_, &record, &billed);
  }();
  record.Finish(ToGrpcStatus(body.status()));
  if (!body.ok()) return DeeplError(body.status());
  AddUsage(client, billed);
  return {200, "application/json", *std::move(body)};
}

}  // namespace glossa::server
