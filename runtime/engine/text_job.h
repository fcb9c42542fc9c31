// Texts to token ids and n-best ids back to texts, shared by the Translator, the server and the
// CLI so that every path treats text the same way (empty texts stay empty and are not decoded).
#ifndef GLOSSA_RUNTIME_ENGINE_TEXT_JOB_H_
#define GLOSSA_RUNTIME_ENGINE_TEXT_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decode/search.h"
#include "engine/model.h"
#include "text/glossary.h"

namespace glossa {

struct TranslatedHypothesis {
  std::string text;
  float score = 0.0f;
  std::vector<int> token_ids;  // prefix + generated ids, EOS included when the search ended with it
  std::vector<float> token_scores;  // with SearchOptions::token_scores: one per id
  // With SearchOptions::alignment: for each id, the source token (an index into the source's
  // ids, end of sentence and language token included) its cross-attention weighs most.
  std::vector<int> alignment;
  std::vector<float> attention;  // the alignment layer's rows: [ids, source ids]
};

struct Translation {
  std::vector<TranslatedHypothesis> hypotheses;  // best first
};

struct TextSources {
  std::vector<std::vector<int>> sources;  // ids of the non-empty texts
  std::vector<size_t> text_index;         // sources[k] comes from texts[text_index[k]]
  size_t num_texts = 0;
};

// INVALID_ARGUMENT names the text (by index) that is not UTF-8 or has more than max_tokens
// tokens (0: the model's limit). language_token (>= 0): the source's language token
// (LanguagePair::source_token), placed where the model's tokenizer puts it.
absl::StatusOr<TextSources> TokenizeTexts(const Model& model, const std::vector<std::string>& texts,
                                          int max_tokens = 0, int language_token = -1);

// Per source of `sources` (tokenized from `texts`): one constraint per glossary term that occurs
// in its text (GlossaryMatcher), in term order, its targets the alternatives, each encoded as
// the model's target tokenizer encodes target text (Tokenizer::EncodeTarget: Hugging Face's
// `tokenizer(text_target=t, add_special_tokens=False)`, the ids of its force_words_ids). Empty
// when no term occurs anywhere. INVALID_ARGUMENT names the entry (a target that is not UTF-8 or
// encodes to nothing, alternatives of which one starts another) or the text (more than
// `max_per_text` terms occur in it).
absl::StatusOr<std::vector<std::vector<Constraint>>> GlossaryConstraints(
    const Model& model, const std::vector<std::string>& texts, const TextSources& sources,
    const std::vector<GlossaryTerm>& terms, int max_per_text);

// The same for the terms of `glossaries` in order (e.g. a stored glossary's, then a request's
// own), each found by its glossary's matcher, compiled beforehand: their terms are numbered
// across them (in errors too), as if they were one list. None null.
absl::StatusOr<std::vector<std::vector<Constraint>>> GlossaryConstraints(
    const Model& model, const std::vector<std::string>& texts, const TextSources& sources,
    const std::vector<const CompiledGlossary*>& glossaries, int max_per_text);

// One Translation per text, in order; empty texts get one empty hypothesis.
std::vector<Translation> DetokenizeResults(const Model& model, const TextSources& sources,
                                           std::vector<std::vector<Hypothesis>> results);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_TEXT_JOB_H_
