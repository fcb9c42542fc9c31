// Synchronous translation of lists of texts with one model, in-process: the offline CLI, the
// benchmarks and the tests use it. Texts are tokenized, sorted by length (so sentences decoded
// together end at similar times), submitted to an Engine as one job, and returned in input order.
// A glossary (TranslateOptions::glossary) becomes the job's constraints: each text's translation
// contains a target of every term found in it (GlossaryConstraints, at most
// kMaxGlossaryTermsPerText per text), by constrained beam search.
#ifndef GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_
#define GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/text_job.h"

namespace glossa {

struct TranslatorOptions {
  int max_batch_size = 32;  // sentences decoded together
  int threads = 1;          // compute (OpenMP) threads of the engine worker that decodes
  int default_beam_size = 4;
  int max_beam_size = 16;
  int max_output_tokens = 0;  // default and ceiling; 0: the model's max_length - 1
  int64_t kv_cache_bytes = int64_t{1} << 30;
};

class Translator {
 public:
  static constexpr int kMaxGlossaryTermsPerText = 16;

  Translator(std::shared_ptr<const Model> model, TranslatorOptions options = {});

  // Empty texts translate to one empty hypothesis without decoding.
  absl::StatusOr<std::vector<Translation>> Translate(const std::vector<std::string>& texts,
                                                     const TranslateOptions& options) const;
  // Each text cut into sentences (engine/document.h, the model's source language), all sentences
  // translated as one job, each text rebuilt with its own whitespace.
  absl::StatusOr<std::vector<Translation>> TranslateDocuments(const std::vector<std::string>& texts,
                                                              const TranslateOptions& options) const;
  // Texts with inline tags (text/inline_tags.h): each is translated without its tags (whole,
  // or cut into sentences as TranslateDocuments does), and the tags are put back on the words
  // that translate the words they marked (engine/tagged_documents.h).
  absl::StatusOr<std::vector<Translation>> TranslateTagged(const std::vector<std::string>& texts,
                                                           const TranslateOptions& options,
                                                           bool split_sentences = false) const;
  // The same from source ids (each ending with </s>); no text in the results, and no glossary
  // (INVALID_ARGUMENT: its terms are found in texts).
  absl::StatusOr<std::vector<std::vector<Hypothesis>>> TranslateIds(
      const std::vector<std::vector<int>>& sources, const TranslateOptions& options) const;

  // The engine's search options (Engine::Resolve); with a glossary, INVALID_ARGUMENT unless they
  // are a beam search (beam size 2 or more, no sampling).
  absl::StatusOr<SearchOptions> Resolve(const TranslateOptions& options) const;
  const Model& model() const { return *model_; }
  const Engine& engine() const { return *engine_; }

 private:
  // TranslateIds with one constraint list per source (or none).
  absl::StatusOr<std::vector<std::vector<Hypothesis>>> Run(
      const std::vector<std::vector<int>>& sources,
      std::vector<std::vector<Constraint>> constraints, const SearchOptions& search) const;

  std::shared_ptr<const Model> model_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_
