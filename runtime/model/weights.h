// Typed views of a model's weights, found by name once at load (never looked up per step).
#ifndef GLOSSA_RUNTIME_MODEL_WEIGHTS_H_
#define GLOSSA_RUNTIME_MODEL_WEIGHTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/model_file.h"
#include "ops/argmax_screen.h"
#include "ops/linear.h"
#include "ops/ops.h"

namespace glossa {

struct LayerNormWeights {
  const float* gamma = nullptr;  // [d_model]
  const float* beta = nullptr;   // [d_model]
};

struct AttentionWeights {
  std::unique_ptr<Linear> q, k, v, out;  // each [d_model -> d_model]
};

struct EncoderLayerWeights {
  AttentionWeights self_attn;
  LayerNormWeights self_attn_norm;
  std::unique_ptr<Linear> fc1;  // d_model -> ffn, activation fused
  std::unique_ptr<Linear> fc2;  // ffn -> d_model
  LayerNormWeights final_norm;
};

struct DecoderLayerWeights {
  AttentionWeights self_attn;
  LayerNormWeights self_attn_norm;
  AttentionWeights cross_attn;
  LayerNormWeights cross_attn_norm;
  std::unique_ptr<Linear> fc1;
  std::unique_ptr<Linear> fc2;
  LayerNormWeights final_norm;
};

struct StackWeights {
  // [vocab, d_model], read through ModelFile::CopyOut (rows looked up do not map the file), each
  // row once: an ops::RowCache of up to 16 MB keeps them (shared by both stacks when tied).
  ops::StoredTable embed_tokens;
  const float* embed_positions = nullptr;  // [max_positions + position_offset, d_model]
  LayerNormWeights embedding_norm;         // when config.layernorm_embedding
  LayerNormWeights final_norm;             // when config.final_layer_norm
};

struct ModelWeights {
  StackWeights encoder;
  StackWeights decoder;
  std::vector<EncoderLayerWeights> encoder_layers;
  std::vector<DecoderLayerWeights> decoder_layers;
  std::unique_ptr<Linear> lm_head;  // d_model -> target vocab, final_logits_bias fused
  // With WeightOptions::argmax_screen, where the output projection may have one (float32, packed
  // for ops/gemv.h, or deferred): its screen, built on first use; null otherwise. With a screen
  // on this CPU the projection's packing is deferred (Linear::Packing::kDeferred): the decoder
  // calls StartPacking at the first step that needs every logit (not a screened step the screen
  // could not decide).
  std::unique_ptr<LazyArgMaxScreen> lm_head_screen;
};

// The compute types of the Linear layers: `compute` for every layer of the encoder and decoder,
// `output_compute` for the output projection (lm_head).
struct WeightOptions {
  ComputeType compute = ComputeType::kFloat32;
  ComputeType output_compute = ComputeType::kFloat32;
  // Allow an ops/argmax_screen.h screen of the output projection (float32 only; built when a
  // greedy step without scores first wants it): such steps then read a quarter of its bytes.
  bool argmax_screen = false;
};

// Finds every tensor the config calls for, checking shapes; names the first that is missing.
// Weight matrices may be stored as float32, bfloat16 or int8; each Linear converts them to its
// compute type once. FAILED_PRECONDITION when this CPU has no kernel for a compute type.
absl::StatusOr<std::unique_ptr<ModelWeights>> LoadWeights(const ModelFile& file,
                                                          const ModelConfig& config,
                                                          const WeightOptions& options = {});

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_MODEL_WEIGHTS_H_
