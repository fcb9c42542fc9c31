#include "engine/text_job.h"

#include "absl/strings/str_cat.h"

namespace glossa {

absl::StatusOr<TextSources> TokenizeTexts(const Model& model, const std::vector<std::string>& texts,
                                          int max_tokens, int language_token) {
  const int limit = max_tokens > 0 ? std::min(max_tokens, model.config().max_positions)
                                   : model.config().max_positions;
  TextSources out;
  out.num_texts = texts.size();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) continue;
    auto ids = model.tokenizer().EncodeSource(texts[i], language_token);
    if (!ids.ok()) {
      return absl::Status(ids.status().code(),
                          absl::StrCat("text ", i, ": ", ids.status().message()));
    }
    if (static_cast<int>(ids->size()) > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text ", i, " has ", ids->size(), " tokens (end of sentence included); the limit is ",
          limit, ": split long texts into sentences"));
    }
    out.sources.push_back(*std::move(ids));
    out.text_index.push_back(i);
  }
  return out;
}

std::vector<Translation> DetokenizeResults(const Model& model, const TextSources& sources,
                                           std::vector<std::vector<Hypothesis>> results) {
  std::vector<Translation> out(sources.num_texts);
  std::vector<bool> filled(sources.num_texts, false);
  for (size_t k = 0; k < results.size() && k < sources.text_index.size(); ++k) {
    const size_t i = sources.text_index[k];
    filled[i] = true;
    for (Hypothesis& h : results[k]) {
      TranslatedHypothesis t;
      t.text = model.tokenizer().DecodeTarget(h.tokens);
      t.score = h.score;
      t.token_ids = std::move(h.tokens);
      t.token_scores = std::move(h.token_scores);
      out[i].hypotheses.push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!filled[i]) out[i].hypotheses.push_back({});
  }
  return out;
}

}  // namespace glossa
