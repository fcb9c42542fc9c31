// The architecture and generation defaults stored in a model file's header.
#ifndef GLOSSA_RUNTIME_MODEL_CONFIG_H_
#define GLOSSA_RUNTIME_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ops/linear.h"

namespace glossa {

struct ModelConfig {
  std::string architecture;  // "marian"
  int d_model = 0;
  int encoder_layers = 0;
  int decoder_layers = 0;
  int encoder_heads = 0;
  int decoder_heads = 0;
  int encoder_ffn_dim = 0;
  int decoder_ffn_dim = 0;
  Activation activation = Activation::kSwish;
  bool normalize_before = false;     // pre-norm layers (mBART, NLLB) vs post-norm (Marian)
  bool layernorm_embedding = false;  // a layer norm right after the embeddings
  bool final_layer_norm = false;     // a layer norm after the last layer (pre-norm models)
  bool scale_embedding = true;       // token embeddings times sqrt(d_model)
  float layer_norm_eps = 1e-5f;
  int max_positions = 0;
  int source_vocab_size = 0;
  int target_vocab_size = 0;
  bool shared_vocab = true;
  int pad_id = 0;
  int eos_id = 0;
  int unk_id = 0;
  int decoder_start_id = 0;
  std::vector<int> banned_ids;  // single-token bad_words_ids: never generated
};

struct GenerationDefaults {
  int num_beams = 4;
  int max_length = 512;  // Hugging Face's max_length: decoder start token included
  float length_penalty = 1.0f;
  bool early_stopping = false;
  int forced_eos_id = -1;  // forced at the last allowed step, -1 for none
};

struct ModelInfo {
  std::string name;
  std::string source_language;
  std::string target_language;
  std::string dtype;
  ModelConfig config;
  GenerationDefaults generation;
};

// Reads and checks the header's "config" and "generation" objects.
absl::StatusOr<ModelInfo> ParseModelInfo(const nlohmann::json& header);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_MODEL_CONFIG_H_
