// Validation of a TranslateRequest and conversion between the proto and the engine's types.
// Every rule answers with INVALID_ARGUMENT (or NOT_FOUND for an unknown model) and a message
// that says what to change.
#ifndef GLOSSA_SERVER_REQUEST_REQUEST_H_
#define GLOSSA_SERVER_REQUEST_REQUEST_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/document.h"
#include "engine/text_job.h"
#include "glossa/v1/translator.pb.h"
#include "server/models/model_registry.h"
#include "server/request/glossary_cache.h"
#include "text/inline_tags.h"

namespace glossa::server {

struct RequestLimits {
  int64_t max_text_bytes = 10000;
  int max_text_tokens = 0;  // 0: the model's limit
  int max_texts = 256;
  int max_glossary_entries = 10000;  // in TranslateRequest.glossary (a stored glossary's limit)
  int max_glossary_term_bytes = 256;
  int max_glossary_terms_per_text = 16;  // terms that occur in one text (a sentence, split)
};

struct PreparedRequest {
  // Held for the request's life: a model removed or replaced meanwhile finishes it.
  std::shared_ptr<LoadedModel> model;
  // With split_sentences: the sentences translated (`sources` are theirs) and how to join them.
  std::shared_ptr<const Documents> documents;
  TextSources sources;
  SearchOptions search;
  Lane lane = Lane::kInteractive;
  bool return_scores = false;
  // False for sampling without a seed (the engine draws one): nothing to cache.
  bool deterministic = true;
  int source_token = -1;  // the source language token of multilingual models (-1: none)
  // With inline_tags: each text's tags (and its text without them, what is translated).
  std::vector<TaggedText> tagged;
  bool return_alignment = false;  // Hypothesis.alignment wanted (inline tags force it on)
  // Empty, or per source of `sources`: the constraints of the glossary terms in its text.
  std::vector<std::vector<Constraint>> constraints;
};

// Parses a glossa.v1.TranslateRequest from its wire bytes. It goes through
// internal::RawTranslateRequest (model and texts as bytes), so that text that is not UTF-8 reaches
// PrepareRequest's checks (INVALID_ARGUMENT with a message) instead of failing here. False when
// the bytes are not a valid message.
bool ParseTranslateRequest(const void* data, size_t size, v1::TranslateRequest* request);

// glossaries: where glossary_id is looked up, and its compiled terms kept (nullptr: no stored
// glossaries). A request's own glossary entries come after the stored glossary's.
absl::StatusOr<PreparedRequest> PrepareRequest(const v1::TranslateRequest& request,
                                               const ModelRegistry& registry,
                                               const RequestLimits& limits, bool stream,
                                               const GlossaryCache* glossaries = nullptr);

void ToProto(const Translation& translation, bool return_scores, v1::Translation* out);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_REQUEST_REQUEST_H_
