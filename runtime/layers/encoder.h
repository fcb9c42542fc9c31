// The Transformer encoder over a batch of sources packed row after row: every matmul runs over
// all real tokens of the batch at once, and no padding row is ever computed.
#ifndef GLOSSA_RUNTIME_LAYERS_ENCODER_H_
#define GLOSSA_RUNTIME_LAYERS_ENCODER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace glossa {

// Sources encoded together, and every decoder layer's cross-attention keys and values for them
// (filled by Decoder::PrecomputeCrossKv), shared by all hypotheses of each source.
struct EncodedBatch {
  int64_t d_model = 0;
  int decoder_layers = 0;
  std::vector<int> offsets;  // [sources] first row of each source
  std::vector<int> lengths;  // [sources] tokens of each source
  int64_t total_rows = 0;
  // [total_rows, d_model] encoder output; the engine frees it once PrecomputeCrossKv has run
  std::vector<float> hidden;
  // [decoder_layers][2][total_rows][d_model]; not zero-filled: PrecomputeCrossKv writes it all
  std::unique_ptr<float[]> cross_kv;
  // The same in half precision instead, where the decoder keeps them so (int8_fast; see
  // Decoder::PrecomputeCrossKv): once that has run, exactly one of the two is set.
  std::unique_ptr<uint16_t[]> cross_kv_half;

  const float* CrossKey(int layer, int source) const {
    return cross_kv.get() + CrossOffset(layer, 0, source);
  }
  const float* CrossValue(int layer, int source) const {
    return cross_kv.get() + CrossOffset(layer, 1, source);
  }
  const uint16_t* CrossKeyHalf(int layer, int source) const {
    return cross_kv_half.get() + CrossOffset(layer, 0, source);
  }
  const uint16_t* CrossValueHalf(int layer, int source) const {
    return cross_kv_half.get() + CrossOffset(layer, 1, source);
  }

 private:
  int64_t CrossOffset(int layer, int value, int source) const {
    return ((int64_t{layer} * 2 + value) * total_rows + offsets[source]) * d_model;
  }
};

class Encoder {
 public:
  Encoder(const ModelConfig& config, const ModelWeights& weights);
  // sources: token ids, each ending with </s> and at most max_positions long.
  std::shared_ptr<EncodedBatch> Encode(const std::vector<std::vector<int>>& sources) const;

 private:
  const ModelConfig& config_;
  const ModelWeights& weights_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_ENCODER_H_
