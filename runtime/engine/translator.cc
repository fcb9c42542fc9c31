#include "engine/translator.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/document.h"
#include "engine/tagged_documents.h"
#include "text/inline_tags.h"
#include "text/languages.h"
#include "util/status_macros.h"

namespace glossa {

Translator::Translator(std::shared_ptr<const Model> model, TranslatorOptions options)
    : model_(std::move(model)) {
  EngineOptions e;
  e.workers = 1;
  e.threads_per_worker = std::max(1, options.threads);
  e.max_active_sequences = std::max(1, options.max_batch_size);
  e.max_active_rows = e.max_active_sequences * std::max(1, options.max_beam_size);
  e.max_queued_sources = std::numeric_limits<int>::max();
  e.kv_cache_bytes = options.kv_cache_bytes;
  e.default_beam_size = options.default_beam_size;
  e.max_beam_size = options.max_beam_size;
  e.max_output_tokens = options.max_output_tokens;
  engine_ = std::make_unique<Engine>(model_, e);
}

absl::StatusOr<SearchOptions> Translator::Resolve(const TranslateOptions& options) const {
  GLOSSA_ASSIGN_OR_RETURN(SearchOptions search, engine_->Resolve(options));
  if (options.glossary.empty()) return search;
  if (search.sampling.temperature > 0.0f) {
    return absl::InvalidArgumentError(
        "a glossary is enforced by beam search: it does not go with sampling");
  }
  if (search.beam_size < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a glossary is enforced by beam search: beam size ", search.beam_size,
        " is greedy search; use a beam size of 2 or more"));
  }
  return search;
}

absl::StatusOr<std::vector<std::vector<Hypothesis>>> Translator::TranslateIds(
    const std::vector<std::vector<int>>& sources, const TranslateOptions& options) const {
  if (!options.glossary.empty()) {
    return absl::InvalidArgumentError(
        "a glossary needs the texts: its terms are found in them, not in token ids");
  }
  GLOSSA_ASSIGN_OR_RETURN(SearchOptions search, Resolve(options));
  return Run(sources, {}, search);
}

absl::StatusOr<std::vector<std::vector<Hypothesis>>> Translator::Run(
    const std::vector<std::vector<int>>& sources,
    std::vector<std::vector<Constraint>> constraints, const SearchOptions& search) const {
  // Longest first; results go back to input order.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sources[a].size() > sources[b].size();
  });
  auto job = std::make_shared<Job>();
  for (size_t i : order) job->sources.push_back(sources[i]);
  if (!constraints.empty()) {
    for (size_t i : order) job->constraints.push_back(std::move(constraints[i]));
  }
  job->search = search;
  absl::Notification done;
  JobResult result;
  job->on_done = [&](JobResult r) {
    result = std::move(r);
    done.Notify();
  };
  absl::Status submitted = engine_->Submit(job);
  if (!submitted.ok()) {
    // Name the caller's text, not its place in the sorted job.
    for (size_t k = 0; k < order.size(); ++k) {
      for (const char* after : {" ", ": "}) {
        const std::string prefix = absl::StrCat("text ", k, after);
        if (absl::StartsWith(submitted.message(), prefix)) {
          return absl::Status(submitted.code(),
                              absl::StrCat("text ", order[k], after,
                                           submitted.message().substr(prefix.size())));
        }
      }
    }
    return submitted;
  }
  done.WaitForNotification();
  if (!result.ok()) return result.status();
  std::vector<std::vector<Hypothesis>> out(sources.size());
  for (size_t k = 0; k < order.size(); ++k) out[order[k]] = std::move((*result)[k]);
  return out;
}

absl::StatusOr<std::vector<Translation>> Translator::TranslateTagged(
    const std::vector<std::string>& texts, const TranslateOptions& options,
    bool split_sentences) const {
  GLOSSA_ASSIGN_OR_RETURN(const LanguagePair languages,
                          ResolveLanguages(model_->info(), model_->tokenizer(),
                                           options.source_language, options.target_language));
  GLOSSA_ASSIGN_OR_RETURN(const std::vector<TaggedText> tagged, ParseTaggedTexts(texts));
  std::vector<std::string> plain;
  for (const TaggedText& t : tagged) plain.push_back(t.text);
  TranslateOptions aligned = options;
  aligned.alignment = true;
  std::optional<Documents> documents;
  if (split_sentences) {
    GLOSSA_ASSIGN_OR_RETURN(documents,
                            SplitDocuments(*model_, plain, model_->info().source_language));
    plain = documents->sentences;
  }
  GLOSSA_ASSIGN_OR_RETURN(std::vector<Translation> out, Translate(plain, aligned));
  out = WriteTags(*model_, languages.source_token, tagged, documents ? &*documents : nullptr,
                  std::move(out));
  if (!options.alignment) {
    for (Translation& t : out) {
      for (TranslatedHypothesis& h : t.hypotheses) h.alignment.clear();
    }
  }
  return out;
}

absl::StatusOr<std::vector<Translation>> Translator::Translate(
    const std::vector<std::string>& texts, const TranslateOptions& options) const {
  GLOSSA_ASSIGN_OR_RETURN(const LanguagePair languages,
                          ResolveLanguages(model_->info(), model_->tokenizer(),
                                           options.source_language, options.target_language));
  GLOSSA_ASSIGN_OR_RETURN(const SearchOptions search, Resolve(options));
  GLOSSA_ASSIGN_OR_RETURN(TextSources sources,
                          TokenizeTexts(*model_, texts, 0, languages.source_token));
  std::vector<std::vector<Constraint>> constraints;
  if (!options.glossary.empty()) {
    GLOSSA_ASSIGN_OR_RETURN(constraints, GlossaryConstraints(*model_, texts, sources,
                                                             options.glossary,
                                                             kMaxGlossaryTermsPerText));
  }
  GLOSSA_ASSIGN_OR_RETURN(auto hyps, Run(sources.sources, std::move(constraints), search));
  return DetokenizeResults(*model_, sources, std::move(hyps));
}

absl::StatusOr<std::vector<Translation>> Translator::TranslateDocuments(
    const std::vector<std::string>& texts, const TranslateOptions& options) const {
  GLOSSA_ASSIGN_OR_RETURN(Documents documents,
                          SplitDocuments(*model_, texts, model_->info().source_language));
  GLOSSA_ASSIGN_OR_RETURN(std::vector<Translation> sentences,
                          Translate(documents.sentences, options));
  return JoinDocuments(documents, sentences);
}

}  // namespace glossa
