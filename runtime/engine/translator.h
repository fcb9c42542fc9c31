// Synchronous translation of lists of texts with one model, in-process: the offline CLI, the
// benchmarks and the tests use it. Texts are tokenized, sorted by length (so sentences decoded
// together end at similar times), submitted to an Engine as one job, and returned in input order.
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
  Translator(std::shared_ptr<const Model> model, TranslatorOptions options = {});

  // Empty texts translate to one empty hypothesis without decoding.
  absl::StatusOr<std::vector<Translation>> Translate(const std::vector<std::string>& texts,
                                                     const TranslateOptions& options) const;
  // Each text cut into sentences (engine/document.h, the model's source language), all sentences
  // translated as one job, each text rebuilt with its own whitespace.
  absl::StatusOr<std::vector<Translation>> TranslateDocuments(const std::vector<std::string>& texts,
                                                              const TranslateOptions& options) const;
  // The same from source ids (each ending with </s>); no text in the results.
  absl::StatusOr<std::vector<std::vector<Hypothesis>>> TranslateIds(
      const std::vector<std::vector<int>>& sources, const TranslateOptions& options) const;

  absl::StatusOr<SearchOptions> Resolve(const TranslateOptions& options) const {
    return engine_->Resolve(options);
  }
  const Model& model() const { return *model_; }
  const Engine& engine() const { return *engine_; }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_
