#include "server/request.h"

#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glossa/internal/raw_request.pb.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

absl::StatusOr<TranslateOptions> ToOptions(const v1::DecodingOptions& o) {
  // NaN fails every comparison, so the range checks further on let it through (found by fuzzing:
  // a NaN temperature meant "no sampling", a NaN top_p "no cut").
  for (float v : {o.length_penalty(), o.sampling_temperature(), o.sampling_top_p()}) {
    if (std::isnan(v)) {
      return absl::InvalidArgumentError(
          "length_penalty, sampling_temperature and sampling_top_p must be numbers, not NaN");
    }
  }
  constexpr uint32_t kHuge = 1u << 20;
  if (o.beam_size() > kHuge || o.num_hypotheses() > kHuge || o.max_output_tokens() > kHuge) {
    return absl::InvalidArgumentError("beam_size, num_hypotheses and max_output_tokens must be "
                                      "small positive numbers");
  }
  TranslateOptions t;
  t.beam_size = static_cast<int>(o.beam_size());
  t.num_hypotheses = static_cast<int>(o.num_hypotheses());
  t.max_output_tokens = static_cast<int>(o.max_output_tokens());
  if (o.length_penalty() != 0.0f) t.length_penalty = o.length_penalty();
  if (o.sampling_top_k() > kHuge) {
    return absl::InvalidArgumentError("sampling_top_k must be a small number (0: no cut)");
  }
  t.sampling.temperature = o.sampling_temperature();
  t.sampling.top_k = static_cast<int>(o.sampling_top_k());
  t.sampling.top_p = o.sampling_top_p();
  t.sampling.seed = o.seed();
  return t;
}

}  // namespace

bool ParseTranslateRequest(const void* data, size_t size, v1::TranslateRequest* request) {
  internal::RawTranslateRequest raw;
  if (size > INT_MAX || !raw.ParseFromArray(data, static_cast<int>(size))) return false;
  // A string field may hold any bytes in memory; only the parser insists on UTF-8.
  request->Clear();
  request->set_model(std::move(*raw.mutable_model()));
  for (std::string& text : *raw.mutable_texts()) request->add_texts(std::move(text));
  if (raw.has_options()) request->mutable_options()->Swap(raw.mutable_options());
  request->set_split_sentences(raw.split_sentences());
  return true;
}

absl::StatusOr<PreparedRequest> PrepareRequest(const v1::TranslateRequest& request,
                                               const ModelRegistry& registry,
                                               const RequestLimits& limits, bool stream) {
  PreparedRequest p;
  GLOSSA_ASSIGN_OR_RETURN(p.model, registry.Find(request.model()));
  const int n = request.texts_size();
  if (stream && n != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TranslateStream takes exactly one text, got ", n, ": use Translate for lists"));
  }
  if (n > limits.max_texts) {
    return absl::InvalidArgumentError(absl::StrCat("the request holds ", n,
                                                   " texts; the limit is ", limits.max_texts,
                                                   ": split it into several requests"));
  }
  for (int i = 0; i < n; ++i) {
    const int64_t bytes = static_cast<int64_t>(request.texts(i).size());
    if (bytes > limits.max_text_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " is ", bytes,
                                                     " bytes; the limit is ", limits.max_text_bytes,
                                                     ": split long texts into sentences"));
    }
  }
  GLOSSA_ASSIGN_OR_RETURN(TranslateOptions options, ToOptions(request.options()));
  GLOSSA_ASSIGN_OR_RETURN(p.search, p.model->engine->Resolve(options));
  p.return_scores = request.options().return_scores();
  std::vector<std::string> texts(request.texts().begin(), request.texts().end());
  if (request.split_sentences()) {
    if (stream) {
      return absl::InvalidArgumentError(
          "TranslateStream translates its text as one sentence: use Translate for split_sentences");
    }
    // The locale of the sentence rules: the request's source language, else the model's.
    const std::string& language = request.source_language().empty()
                                      ? p.model->model->info().source_language
                                      : request.source_language();
    GLOSSA_ASSIGN_OR_RETURN(
        Documents documents,
        SplitDocuments(*p.model->model, texts, language, limits.max_text_tokens));
    texts = documents.sentences;
    p.documents = std::make_shared<const Documents>(std::move(documents));
  }
  GLOSSA_ASSIGN_OR_RETURN(p.sources,
                          TokenizeTexts(*p.model->model, texts, limits.max_text_tokens));
  return p;
}

void ToProto(const Translation& translation, bool return_scores, v1::Translation* out) {
  for (const TranslatedHypothesis& h : translation.hypotheses) {
    v1::Hypothesis* hyp = out->add_hypotheses();
    hyp->set_text(h.text);
    if (return_scores) hyp->set_score(h.score);
    hyp->mutable_token_ids()->Add(h.token_ids.begin(), h.token_ids.end());
  }
}

}  // namespace glossa::server
