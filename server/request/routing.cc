#include "server/request/routing.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/models/router.h"
#include "text/languages.h"
#include "text/tokenizer.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

using ModelMap = CardMap;

bool IsBlank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

// The languages "auto" chooses among: the named model's sources, or every source the server
// routes into the target (directly or through the pivot).
std::set<std::string> Candidates(const ModelMap& models, const std::string& model,
                                 const std::string& target, const std::string& pivot) {
  std::set<std::string> out;
  if (!model.empty()) {
    auto it = models.find(model);
    if (it == models.end()) return out;
    return SourceLanguagesOf({{it->first, it->second}});
  }
  for (const std::string& source : SourceLanguagesOf(models)) {
    if (target.empty() || RouteLanguages(models, source, target, pivot).ok()) out.insert(source);
  }
  return out;
}

// Per text, its detected language (empty for a blank text).
absl::StatusOr<std::vector<DetectedLanguage>> DetectTexts(const v1::TranslateRequest& request,
                                                          const std::set<std::string>& candidates) {
  std::vector<DetectedLanguage> out(request.texts_size());
  for (int i = 0; i < request.texts_size(); ++i) {
    const std::string& text = request.texts(i);
    if (IsBlank(text)) continue;
    if (!IsValidUtf8(text)) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " is not valid UTF-8"));
    }
    auto detected = DetectAmong(text, candidates);
    if (!detected.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("text ", i, " (source_language auto): ", detected.status().message()));
    }
    out[i] = *std::move(detected);
  }
  return out;
}

// One part: `texts` of `request` from `source`, by the model the request names or its route.
absl::StatusOr<RoutedPart> MakePart(const v1::TranslateRequest& request, const ModelMap& models,
                                    const std::string& source, std::vector<int> texts,
                                    const std::string& pivot) {
  RoutedPart part;
  part.texts = std::move(texts);
  part.request = request;
  part.request.clear_texts();
  for (int i : part.texts) part.request.add_texts(request.texts(i));
  part.request.set_source_language(source);
  if (!request.model().empty()) {
    part.route = request.model();
    return part;
  }
  GLOSSA_ASSIGN_OR_RETURN(Route route,
                          RouteLanguages(models, source, request.target_language(), pivot));
  part.route = route.Name();
  part.request.set_model(route.first->name);
  if (route.second == nullptr) return part;
  if (request.glossary_size() > 0 || !request.glossary_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no single model translates '", source, "' into '", request.target_language(),
        "' (the server would go through '", pivot,
        "'), and a glossary needs one: name a model, or translate without the glossary"));
  }
  part.pivot = route.pivot;
  part.second = request;
  part.second.clear_texts();
  part.second.set_model(route.second->name);
  part.second.set_source_language(route.pivot);
  part.request.set_target_language(route.pivot);
  *part.request.mutable_options() = FirstHopOptions(request.options());
  return part;
}

bool NeedsRouting(const v1::TranslateRequest& request, const ModelMap& models) {
  if (request.source_language() == "auto") return true;
  return request.model().empty() && models.size() > 1 && !request.source_language().empty() &&
         !request.target_language().empty();
}

}  // namespace

std::set<std::string> AutoCandidates(const ModelRegistry& registry, const std::string& model,
                                     const std::string& target, const std::string& pivot) {
  return Candidates(registry.cards(), model, target, pivot);
}

v1::DecodingOptions FirstHopOptions(const v1::DecodingOptions& options) {
  v1::DecodingOptions first;
  const bool greedy = options.beam_size() == 1 && options.sampling_temperature() <= 0.0f;
  first.set_beam_size(greedy ? 1 : 4);
  first.set_num_hypotheses(1);
  first.set_max_output_tokens(options.max_output_tokens());
  return first;
}

absl::StatusOr<RoutedRequest> RouteRequest(const v1::TranslateRequest& given,
                                           const ModelRegistry& registry,
                                           const std::string& pivot) {
  RoutedRequest out;
  const ModelMap models = registry.cards();
  v1::TranslateRequest request = given;
  // One model: every request is its (as when it names it).
  if (request.model().empty() && models.size() == 1) request.set_model(models.begin()->first);
  if (!NeedsRouting(request, models)) {
    RoutedPart part;
    for (int i = 0; i < request.texts_size(); ++i) part.texts.push_back(i);
    part.request = request;
    part.route = request.model();
    out.parts.push_back(std::move(part));
    return out;
  }
  if (request.source_language() != "auto") {
    std::vector<int> all;
    for (int i = 0; i < request.texts_size(); ++i) all.push_back(i);
    GLOSSA_ASSIGN_OR_RETURN(RoutedPart part, MakePart(request, models, request.source_language(),
                                                      std::move(all), pivot));
    out.parts.push_back(std::move(part));
    return out;
  }
  if (!request.model().empty() && models.count(request.model()) == 0) {
    return registry.Find(request.model()).status();  // NOT_FOUND naming the loaded models
  }
  const std::set<std::string> candidates =
      Candidates(models, request.model(), request.target_language(), pivot);
  if (candidates.empty()) {
    return absl::NotFoundError(absl::StrCat("no model translates into '",
                                            request.target_language(), "' from any language"));
  }
  GLOSSA_ASSIGN_OR_RETURN(out.detected, DetectTexts(request, candidates));
  // Texts grouped by language, in order of first appearance; blank texts join the first group.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::vector<int> blank;
  for (int i = 0; i < request.texts_size(); ++i) {
    const std::string& language = out.detected[i].language;
    if (language.empty()) {
      blank.push_back(i);
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == language; });
    if (it == groups.end()) it = groups.insert(groups.end(), {language, {}});
    it->second.push_back(i);
  }
  if (groups.empty()) groups.push_back({*candidates.begin(), {}});
  groups.front().second.insert(groups.front().second.end(), blank.begin(), blank.end());
  std::sort(groups.front().second.begin(), groups.front().second.end());
  for (auto& [language, texts] : groups) {
    GLOSSA_ASSIGN_OR_RETURN(RoutedPart part,
                            MakePart(request, models, language, std::move(texts), pivot));
    out.parts.push_back(std::move(part));
  }
  return out;
}

}  // namespace glossa::server
