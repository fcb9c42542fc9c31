// Which model translates a language pair when a request names none.
//
// A model covers a pair when it accepts both languages (runtime/text/languages.h): a bilingual
// model its own pair, a Marian multi-target model its source and any of its ">>xx<<" targets, a
// multilingual model any two of its languages. Among the models that cover a pair, the order is:
// higher priority (--model_config priority=), a bilingual model before a multilingual one, the
// smaller model file, the name. When none covers it, a pivot language (--pivot_language) may join
// two: source -> pivot by the first model, pivot -> target by the second, each chosen in that
// order.
#ifndef GLOSSA_SERVER_MODELS_ROUTER_H_
#define GLOSSA_SERVER_MODELS_ROUTER_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/models/model_registry.h"

namespace glossa::server {

// Routing sees every model served, loaded or not (its card): a route's models load when its
// request finds them (ModelRegistry::Find).
struct Route {
  std::shared_ptr<const ModelCard> first;   // source -> target; with a pivot, source -> pivot
  std::shared_ptr<const ModelCard> second;  // pivot -> target; null for a direct route
  std::string pivot;                    // the pivot language (empty for a direct route)
  // The name a response reports: "first" or "first+second".
  std::string Name() const;
};

// True when `model` translates source -> target (both non-empty).
bool Covers(const ModelCard& model, absl::string_view source, absl::string_view target);

// The route of source -> target among `models`: direct when a model covers it, else through
// `pivot` (empty: never). NOT_FOUND, naming the languages the server has, when there is none.
absl::StatusOr<Route> RouteLanguages(const CardMap& models,
                                     absl::string_view source, absl::string_view target,
                                     absl::string_view pivot);

// The languages the models translate from and into, as ISO 639-1 codes where the language has
// one (else the model's own code): what language detection chooses among.
std::set<std::string> SourceLanguagesOf(
    const CardMap& models);
std::set<std::string> TargetLanguagesOf(
    const CardMap& models);

// Every pair the models translate (ISO 639-1 codes where there is one): each source's targets
// covered by a model, and those reachable only through `pivot` (empty: none).
struct LanguagePairs {
  std::map<std::string, std::set<std::string>> direct, pivoted;
};
LanguagePairs PairsOf(const CardMap& models,
                      absl::string_view pivot);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_MODELS_ROUTER_H_
