// A TranslateRequest that names no model, or whose source_language is "auto", split into the
// parts that one model (or two, through a pivot language) translates.
//
// Without a model name, a request that gives both languages is routed (server/models/router.h);
// with "auto", each text's language is detected (CLD2) among the languages the server can
// translate from into the target (or the named model's), and the texts are grouped by language,
// a part per group. Everything else passes through as one part: the request as it was.
#ifndef GLOSSA_SERVER_REQUEST_ROUTING_H_
#define GLOSSA_SERVER_REQUEST_ROUTING_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "glossa/v1/translator.pb.h"
#include "server/models/model_registry.h"
#include "server/text/language_detector.h"

namespace glossa::server {

struct RoutedPart {
  std::vector<int> texts;        // indices of the request's texts, in order
  v1::TranslateRequest request;  // these texts, their model and source language set
  // Through a pivot: `request` translates into `pivot`; `second` is the second hop's request
  // without its texts (the first hop's best hypotheses), with the original decoding options.
  std::string pivot;
  v1::TranslateRequest second;
  std::string route;  // what the response's model reports: "model" or "first+second"
};

struct RoutedRequest {
  std::vector<RoutedPart> parts;
  // With "auto": per text, its language (empty for an empty text) and confidence (0-100).
  std::vector<DetectedLanguage> detected;
};

// pivot: the pivot language (empty: no pivot). INVALID_ARGUMENT for a text whose language cannot
// be told (naming the candidates), NOT_FOUND for a pair no model covers.
absl::StatusOr<RoutedRequest> RouteRequest(const v1::TranslateRequest& request,
                                           const ModelRegistry& registry,
                                           const std::string& pivot);

// The languages "auto" chooses among for a request into `target` (ISO 639-1 where there is
// one): the named model's sources (`model` non-empty), else every source the server routes into
// `target` directly or through `pivot` (every source, with `target` empty).
std::set<std::string> AutoCandidates(const ModelRegistry& registry, const std::string& model,
                                     const std::string& target, const std::string& pivot);

// The first hop's options: beam 4 (greedy when the request is greedy), one hypothesis, no other
// control (they are the second hop's).
v1::DecodingOptions FirstHopOptions(const v1::DecodingOptions& options);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_REQUEST_ROUTING_H_
