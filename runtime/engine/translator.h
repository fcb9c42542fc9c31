// Translates lists of texts with one model, in-process: sources are sorted by length, encoded in
// batches, decoded step by step together (StepBatch), and returned in input order.
#ifndef GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_
#define GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decode/search.h"
#include "engine/model.h"
#include "layers/kv_cache.h"

namespace glossa {

// Per-request decoding options; zero / unset means "the default".
struct TranslateOptions {
  int beam_size = 0;
  std::optional<float> length_penalty;
  int max_output_tokens = 0;  // tokens generated, EOS included
  int num_hypotheses = 0;
};

struct TranslatorOptions {
  int max_batch_size = 32;     // sources encoded and decoded together
  int default_beam_size = 4;
  int max_beam_size = 16;
  int max_output_tokens = 0;   // default and ceiling; 0: the model's max_length - 1
  int64_t kv_cache_bytes = int64_t{1} << 30;
};

struct TranslatedHypothesis {
  std::string text;
  float score = 0.0f;
  std::vector<int> token_ids;  // generated ids, EOS included when the search ended with it
};

struct Translation {
  std::vector<TranslatedHypothesis> hypotheses;  // best first
};

class Translator {
 public:
  Translator(std::shared_ptr<const Model> model, TranslatorOptions options = {});

  absl::StatusOr<std::vector<Translation>> Translate(const std::vector<std::string>& texts,
                                                     const TranslateOptions& options) const;
  // The same from source ids (each ending with </s>); no text in the results.
  absl::StatusOr<std::vector<std::vector<Hypothesis>>> TranslateIds(
      const std::vector<std::vector<int>>& sources, const TranslateOptions& options) const;

  // The search options a request gets; INVALID_ARGUMENT says which option is out of range.
  absl::StatusOr<SearchOptions> Resolve(const TranslateOptions& options) const;
  const Model& model() const { return *model_; }
  const KvBlockPool& kv_pool() const { return *pool_; }

 private:
  std::shared_ptr<const Model> model_;
  TranslatorOptions options_;
  SearchVocab vocab_;
  std::unique_ptr<KvBlockPool> pool_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_TRANSLATOR_H_
