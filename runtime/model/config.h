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
  std::string architecture;  // "marian", "m2m_100" (M2M100, NLLB-200) or "mbart" (mBART-50)
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
  // Position t of a sequence reads row t + position_offset of embed_positions
  // ([max_positions + position_offset, d_model]): 0 for Marian, padding_idx + 1 for M2M100, 2 for
  // mBART. With positions_from_pad (M2M100), a pad token reads row pad_id (all zeros) and does not
  // advance the positions of the tokens after it (fairseq's make_positions).
  int position_offset = 0;
  bool positions_from_pad = false;
  int source_vocab_size = 0;
  int target_vocab_size = 0;
  bool shared_vocab = true;
  int pad_id = 0;
  int eos_id = 0;
  int unk_id = 0;
  int decoder_start_id = 0;
  std::vector<int> banned_ids;  // single-token bad_words_ids: never generated
};

// The row of embed_positions that `token` at `position` (its index among the sequence's non-pad
// tokens) reads.
inline int PositionRow(const ModelConfig& c, int token, int position) {
  return c.positions_from_pad && token == c.pad_id ? c.pad_id : position + c.position_offset;
}

struct GenerationDefaults {
  int num_beams = 4;
  int max_length = 512;  // Hugging Face's max_length: decoder start token included
  float length_penalty = 1.0f;
  bool early_stopping = false;
  int forced_eos_id = -1;  // forced at the last allowed step, -1 for none
};

// A language of a multilingual model: the token that selects it and the codes that name it.
struct LanguageCode {
  std::string code;   // the model's own form: "spa_Latn", "es_XX", "es"
  std::string token;  // its vocabulary token: "spa_Latn", "es_XX", "__es__"
  int id = 0;         // the token's id
  std::string iso639_1, iso639_3;  // aliases a request may use ("" when there is none)
};

struct ModelInfo {
  std::string name;
  std::string source_language;  // bilingual models; empty for multilingual ones
  std::string target_language;
  std::vector<LanguageCode> languages;  // multilingual models: sources and targets alike
  std::string dtype;
  ModelConfig config;
  GenerationDefaults generation;
};

// Reads and checks the header's "config" and "generation" objects.
absl::StatusOr<ModelInfo> ParseModelInfo(const nlohmann::json& header);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_MODEL_CONFIG_H_
