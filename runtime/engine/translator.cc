#include "engine/translator.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/step_batch.h"
#include "util/status_macros.h"

namespace glossa {

Translator::Translator(std::shared_ptr<const Model> model, TranslatorOptions options)
    : model_(std::move(model)), options_(options) {
  const ModelConfig& c = model_->config();
  const GenerationDefaults& g = model_->info().generation;
  const int limit = std::min(g.max_length - 1, c.max_positions);
  if (options_.max_output_tokens <= 0 || options_.max_output_tokens > limit) {
    options_.max_output_tokens = limit;
  }
  vocab_.vocab_size = c.target_vocab_size;
  vocab_.eos_id = c.eos_id;
  vocab_.decoder_start_id = c.decoder_start_id;
  vocab_.forced_eos_id = g.forced_eos_id;
  vocab_.banned_ids = c.banned_ids;
  const int64_t block_floats = KvCache::BlockFloats(c.decoder_layers, c.d_model);
  pool_ = std::make_unique<KvBlockPool>(
      block_floats, std::max<int64_t>(1, options_.kv_cache_bytes / (block_floats * 4)));
}

absl::StatusOr<SearchOptions> Translator::Resolve(const TranslateOptions& o) const {
  SearchOptions s;
  s.beam_size = o.beam_size > 0 ? o.beam_size : options_.default_beam_size;
  if (s.beam_size > options_.max_beam_size) {
    return absl::InvalidArgumentError(absl::StrCat("beam_size ", s.beam_size, " exceeds the limit ",
                                                   options_.max_beam_size));
  }
  s.num_hypotheses = o.num_hypotheses > 0 ? o.num_hypotheses : 1;
  if (s.num_hypotheses > s.beam_size) {
    return absl::InvalidArgumentError(absl::StrCat("num_hypotheses ", s.num_hypotheses,
                                                   " exceeds beam_size ", s.beam_size));
  }
  s.max_new_tokens = o.max_output_tokens > 0 ? o.max_output_tokens : options_.max_output_tokens;
  if (s.max_new_tokens > options_.max_output_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_output_tokens ", s.max_new_tokens,
                                                   " exceeds the limit ",
                                                   options_.max_output_tokens));
  }
  s.length_penalty = o.length_penalty.value_or(model_->info().generation.length_penalty);
  if (!(s.length_penalty >= -10.0f && s.length_penalty <= 10.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("length_penalty ", s.length_penalty, " is outside [-10, 10]"));
  }
  s.early_stopping = model_->info().generation.early_stopping;
  return s;
}

absl::StatusOr<std::vector<std::vector<Hypothesis>>> Translator::TranslateIds(
    const std::vector<std::vector<int>>& sources, const TranslateOptions& options) const {
  GLOSSA_ASSIGN_OR_RETURN(SearchOptions search, Resolve(options));
  const ModelConfig& c = model_->config();
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty() || static_cast<int>(sources[i].size()) > c.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "source ", i, " has ", sources[i].size(), " tokens; this model accepts 1 to ",
          c.max_positions, ": split long texts into sentences"));
    }
    for (int id : sources[i]) {
      if (id < 0 || id >= c.source_vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("source ", i, " holds token id ", id,
                                                       ", outside the source vocabulary"));
      }
    }
  }
  // Longest first, so each batch holds sources of similar length; results go back in order.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sources[a].size() > sources[b].size();
  });
  std::vector<std::vector<Hypothesis>> results(sources.size());
  const size_t batch_size = static_cast<size_t>(std::max(1, options_.max_batch_size));
  for (size_t begin = 0; begin < order.size(); begin += batch_size) {
    const size_t end = std::min(order.size(), begin + batch_size);
    std::vector<std::vector<int>> batch_sources;
    for (size_t i = begin; i < end; ++i) batch_sources.push_back(sources[order[i]]);
    std::shared_ptr<EncodedBatch> encoded = model_->encoder().Encode(batch_sources);
    model_->decoder().PrecomputeCrossKv(*encoded);
    StepBatch step_batch(*model_);
    for (size_t i = begin; i < end; ++i) {
      auto group = std::make_unique<SequenceGroup>(
          Search(search, vocab_), encoded, static_cast<int>(i - begin),
          std::make_unique<KvCache>(pool_.get(), c.decoder_layers, c.d_model, search.beam_size));
      group->id = static_cast<int>(order[i]);
      step_batch.Add(std::move(group));
    }
    std::vector<std::unique_ptr<SequenceGroup>> finished;
    while (!step_batch.empty()) {
      GLOSSA_RETURN_IF_ERROR(step_batch.Step(&finished));
      for (auto& g : finished) results[g->id] = g->search.Results();
      finished.clear();
    }
  }
  return results;
}

absl::StatusOr<std::vector<Translation>> Translator::Translate(
    const std::vector<std::string>& texts, const TranslateOptions& options) const {
  std::vector<std::vector<int>> sources;
  std::vector<size_t> index;  // sources[k] translates texts[index[k]]; empty texts stay empty
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) continue;
    auto ids = model_->tokenizer().EncodeSource(texts[i]);
    if (!ids.ok()) {
      return absl::Status(ids.status().code(),
                          absl::StrCat("text ", i, ": ", ids.status().message()));
    }
    if (static_cast<int>(ids->size()) > model_->config().max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text ", i, " has ", ids->size(), " tokens; this model accepts at most ",
          model_->config().max_positions, ": split long texts into sentences"));
    }
    sources.push_back(*std::move(ids));
    index.push_back(i);
  }
  GLOSSA_ASSIGN_OR_RETURN(auto hyps, TranslateIds(sources, options));
  std::vector<Translation> out(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) out[i].hypotheses.push_back({});
  }
  for (size_t k = 0; k < hyps.size(); ++k) {
    for (Hypothesis& h : hyps[k]) {
      TranslatedHypothesis t;
      t.text = model_->tokenizer().DecodeTarget(h.tokens);
      t.score = h.score;
      t.token_ids = std::move(h.tokens);
      out[index[k]].hypotheses.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace glossa
