// What the server knows of a model without loading it: its name and spec, its file's header
// (architecture, languages, sizes) and its Marian target tokens, enough to route a request and to
// list it. A catalogued model (--models_dir, or `dir=` in --model_config) is only a card until its
// first request loads it.
#ifndef GLOSSA_SERVER_MODELS_MODEL_CARD_H_
#define GLOSSA_SERVER_MODELS_MODEL_CARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model.h"
#include "model/config.h"
#include "server/models/model_config.h"

namespace glossa::server {

struct ModelCard {
  std::string name;
  ModelSpec spec;
  FileStamp stamp;  // the file when the card was read
  ModelInfo info;   // from the file's header; dtype: the compute type it loads (or loaded) as
  std::vector<std::string> target_prefix_tokens;  // Marian multi-target: ">>fra<<", ...
  // What the loaded model is expected to hold in memory: its weights in their compute type, the
  // KV cache its engine may grow to aside (engine buffers are counted once loaded).
  int64_t estimated_bytes = 0;
};

// What a model's first requests add to its output layer: with a greedy screen of a float32
// output layer (ModelOptions::argmax_screen), the screen (one byte per weight) and, for beam
// search, the layer's copy in the matmul layout (four bytes per weight).
int64_t OutputLayerExtras(const ModelCard& card);

// What loading the model is expected to take before it has been loaded once.
inline int64_t ExpectedBytes(const ModelCard& card) {
  return card.estimated_bytes + OutputLayerExtras(card);
}

// Reads the header and vocabulary of spec.path (the weights stay on disk): INVALID_ARGUMENT or
// NOT_FOUND naming the file when it is not a model Glossa can load.
absl::StatusOr<std::shared_ptr<const ModelCard>> ReadModelCard(const ModelSpec& spec);

// The card of a model loaded already (no second read of its file).
std::shared_ptr<const ModelCard> CardOf(const ModelSpec& spec, const FileStamp& stamp,
                                        const Model& model);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_MODELS_MODEL_CARD_H_
