#include "server/models/router.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "text/languages.h"

namespace glossa::server {
namespace {

using ModelMap = CardMap;

// Routing order: higher priority, bilingual before multilingual, smaller file, name.
bool Before(const ModelCard& a, const ModelCard& b) {
  const bool a_multi = !a.info.languages.empty();
  const bool b_multi = !b.info.languages.empty();
  return std::make_tuple(-a.spec.priority, a_multi, a.stamp.size, a.name) <
         std::make_tuple(-b.spec.priority, b_multi, b.stamp.size, b.name);
}

std::shared_ptr<const ModelCard> Best(const ModelMap& models, absl::string_view source,
                                  absl::string_view target) {
  std::shared_ptr<const ModelCard> best;
  for (const auto& [name, model] : models) {
    if (Covers(*model, source, target) && (best == nullptr || Before(*model, *best))) {
      best = model;
    }
  }
  return best;
}

// ">>fra<<" -> "fra"; other codes as they are.
std::string StripTargetToken(const std::string& code) {
  if (code.size() > 4 && code.rfind(">>", 0) == 0 && code.compare(code.size() - 2, 2, "<<") == 0) {
    return code.substr(2, code.size() - 4);
  }
  return code;
}

void AddCodes(const std::vector<std::string>& codes, std::set<std::string>* out) {
  for (const std::string& code : codes) out->insert(Iso639_1(StripTargetToken(code)));
}

// A multilingual model's languages by their ISO 639-1 code where there is one.
void AddMultilingual(const ModelInfo& info, std::set<std::string>* out) {
  for (const LanguageCode& l : info.languages) {
    out->insert(l.iso639_1.empty() ? l.code : l.iso639_1);
  }
}

}  // namespace

std::string Route::Name() const {
  if (first == nullptr) return "";
  return second == nullptr ? first->name : absl::StrCat(first->name, "+", second->name);
}

bool Covers(const ModelCard& model, absl::string_view source, absl::string_view target) {
  if (source.empty() || target.empty()) return false;
  return CheckLanguages(model.info, model.target_prefix_tokens, source, target).ok();
}

absl::StatusOr<Route> RouteLanguages(const ModelMap& models, absl::string_view source,
                                     absl::string_view target, absl::string_view pivot) {
  Route route;
  route.first = Best(models, source, target);
  if (route.first != nullptr) return route;
  const bool pivot_differs = !pivot.empty() && Iso639_1(pivot) != Iso639_1(source) &&
                             Iso639_1(pivot) != Iso639_1(target);
  if (pivot_differs) {
    auto first = Best(models, source, pivot);
    auto second = first == nullptr ? nullptr : Best(models, pivot, target);
    if (second != nullptr) {
      route.first = std::move(first);
      route.second = std::move(second);
      route.pivot = std::string(pivot);
      return route;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no model translates '", source, "' into '", target, "'",
      pivot_differs ? absl::StrCat(", directly or through '", pivot, "'") : std::string(),
      ": this server translates from ", absl::StrJoin(SourceLanguagesOf(models), ", "),
      " and into ", absl::StrJoin(TargetLanguagesOf(models), ", "),
      " (ListModels gives each model's pairs)"));
}

std::set<std::string> SourceLanguagesOf(const ModelMap& models) {
  std::set<std::string> out;
  for (const auto& [name, model] : models) {
    const ModelInfo& info = model->info;
    if (info.languages.empty()) {
      AddCodes(SourceLanguages(info), &out);
    } else {
      AddMultilingual(info, &out);
    }
  }
  return out;
}

std::set<std::string> TargetLanguagesOf(const ModelMap& models) {
  std::set<std::string> out;
  for (const auto& [name, model] : models) {
    const ModelInfo& info = model->info;
    if (info.languages.empty()) {
      AddCodes(TargetLanguages(info, model->target_prefix_tokens), &out);
    } else {
      AddMultilingual(info, &out);
    }
  }
  return out;
}

LanguagePairs PairsOf(const ModelMap& models, absl::string_view pivot) {
  LanguagePairs out;
  for (const auto& [name, model] : models) {
    const ModelMap one = {{name, model}};
    const std::set<std::string> targets = TargetLanguagesOf(one);
    for (const std::string& source : SourceLanguagesOf(one)) {
      std::set<std::string>& to = out.direct[source];
      for (const std::string& target : targets) {
        if (target != source) to.insert(target);
      }
    }
  }
  const std::string p = Iso639_1(pivot);
  auto from_pivot = out.direct.find(p);
  if (p.empty() || from_pivot == out.direct.end()) return out;
  for (const auto& [source, targets] : out.direct) {
    if (source == p || targets.count(p) == 0) continue;
    for (const std::string& target : from_pivot->second) {
      if (target != source && targets.count(target) == 0) out.pivoted[source].insert(target);
    }
  }
  return out;
}

}  // namespace glossa::server
