#include "server/deepl/deepl_languages.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/common/status_util.h"
#include "server/http_api/libretranslate.h"
#include "server/models/router.h"
#include "server/request/routing.h"
#include "text/languages.h"

namespace glossa::server {
namespace {

using json = nlohmann::ordered_json;  // DeepL's order of fields

std::set<std::string> ServedLanguages(const CardMap& models) {
  std::set<std::string> out = SourceLanguagesOf(models);
  for (const std::string& code : TargetLanguagesOf(models)) out.insert(code);
  return out;
}

// The served codes (and model codes) a DeepL code may stand for, best first.
std::vector<std::string> Candidates(const std::set<std::string>& served,
                                    absl::string_view deepl) {
  std::vector<std::string> out;
  auto add = [&out](std::string code) {
    if (std::find(out.begin(), out.end(), code) == out.end()) out.push_back(std::move(code));
  };
  if (deepl.empty()) return out;
  for (const std::string& code : served) {
    if (absl::EqualsIgnoreCase(DeeplCode(code), deepl)) add(code);
  }
  const std::string lower = absl::AsciiStrToLower(deepl);
  const std::string base = lower.substr(0, lower.find('-'));
  if (lower == "zh-hant") {
    add("zho_Hant");
  } else if (base == "zh") {
    add("zh");
    add("zho_Hans");
  }
  add(Iso639_1(base));
  return out;
}

absl::Status Unsupported(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("Value for '", name, "' not supported."));
}

}  // namespace

std::string DeeplCode(absl::string_view code) {
  return absl::AsciiStrToUpper(absl::StrReplaceAll(code, {{"_", "-"}}));
}

absl::StatusOr<DeeplPair> ResolveDeeplPair(const TranslatorService& service,
                                           absl::string_view source_lang,
                                           absl::string_view target_lang) {
  const CardMap models = service.registry().cards();
  const std::string& pivot = service.pivot_language();
  const std::set<std::string> served = ServedLanguages(models);
  std::vector<std::string> targets;
  for (std::string& code : Candidates(served, target_lang)) {
    if (!AutoCandidates(service.registry(), "", code, pivot).empty()) {
      targets.push_back(std::move(code));
    }
  }
  if (targets.empty()) return Unsupported("target_lang");
  if (source_lang.empty()) return DeeplPair{"", targets.front()};
  const std::vector<std::string> sources = Candidates(served, source_lang);
  for (const std::string& source : sources) {
    for (const std::string& target : targets) {
      if (RouteLanguages(models, source, target, pivot).ok()) return DeeplPair{source, target};
    }
  }
  const std::set<std::string> known = SourceLanguagesOf(models);
  if (std::none_of(sources.begin(), sources.end(),
                   [&](const std::string& s) { return known.count(s) > 0; })) {
    return Unsupported("source_lang");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "This server does not translate ", QuoteForMessage(source_lang), " into ",
      QuoteForMessage(target_lang), ": GET /v2/glossary-language-pairs lists its pairs."));
}

std::string DeeplLanguagesJson(const TranslatorService& service, bool target) {
  const CardMap models = service.registry().cards();
  const std::set<std::string> codes =
      target ? TargetLanguagesOf(models) : SourceLanguagesOf(models);
  json out = json::array();
  for (const std::string& code : codes) {
    std::vector<std::pair<std::string, std::string>> entries = {
        {DeeplCode(code), LanguageName(code)}};
    if (target && code == "en") {
      entries = {{"EN-GB", "English (British)"}, {"EN-US", "English (American)"}};
    } else if (target && code == "pt") {
      entries = {{"PT-BR", "Portuguese (Brazilian)"}, {"PT-PT", "Portuguese (European)"}};
    } else if (target && code == "zh") {
      entries = {{"ZH", "Chinese (simplified)"}, {"ZH-HANS", "Chinese (simplified)"}};
    }
    for (const auto& [language, name] : entries) {
      json entry = {{"language", language}, {"name", name}};
      if (target) entry["supports_formality"] = false;
      out.push_back(std::move(entry));
    }
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string DeeplGlossaryPairsJson(const TranslatorService& service) {
  const LanguagePairs pairs = PairsOf(service.registry().cards(), service.pivot_language());
  std::set<std::pair<std::string, std::string>> all;
  for (const auto* side : {&pairs.direct, &pairs.pivoted}) {
    for (const auto& [source, targets] : *side) {
      for (const std::string& target : targets) {
        all.emplace(absl::AsciiStrToLower(DeeplCode(source)),
                    absl::AsciiStrToLower(DeeplCode(target)));
      }
    }
  }
  json list = json::array();
  for (const auto& [source, target] : all) {
    list.push_back({{"source_lang", source}, {"target_lang", target}});
  }
  return json{{"supported_languages", list}}.dump(-1, ' ', false,
                                                  json::error_handler_t::replace);
}

bool IsDeeplGlossaryPair(const TranslatorService& service, absl::string_view source,
                         absl::string_view target) {
  return !source.empty() && ResolveDeeplPair(service, source, target).ok();
}

}  // namespace glossa::server
