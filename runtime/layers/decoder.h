// The Transformer decoder, one step at a time for any set of sequences: greedy sequences and beam
// hypotheses of different requests side by side, each row with its own position, cache slot and
// source. A scheduler can add or drop rows between any two steps.
#ifndef GLOSSA_RUNTIME_LAYERS_DECODER_H_
#define GLOSSA_RUNTIME_LAYERS_DECODER_H_

#include <vector>

#include "layers/encoder.h"
#include "layers/kv_cache.h"
#include "model/config.h"
#include "model/weights.h"

namespace glossa {

// One sequence (or beam hypothesis) in one decoder step.
struct DecoderRow {
  int token = 0;     // input token at this step
  int position = 0;  // its position; the row attends over positions [0, position]
  KvCache* cache = nullptr;
  int slot = 0;                // this step's K/V are written at (slot, position)
  const int* ancestry = nullptr;  // [position + 1]: the cache slot holding each earlier position
                                  // of this hypothesis; ancestry[position] == slot
  const EncodedBatch* source_batch = nullptr;
  int source = 0;  // index of this row's source in source_batch
};

// Buffers reused across steps; they grow to the largest step seen and are never shrunk.
struct DecoderScratch {
  std::vector<int> ids, positions;
  std::vector<float> x, h, q, k, v, a, ffn, scores;
};

class Decoder {
 public:
  Decoder(const ModelConfig& config, const ModelWeights& weights);

  // Fills batch.cross_kv: every layer's cross-attention keys and values, computed once.
  void PrecomputeCrossKv(EncodedBatch& batch) const;

  // One step for every row: writes each row's K/V into its cache and the next-token logits
  // (final_logits_bias included) into logits[rows.size(), target_vocab_size].
  void Step(const std::vector<DecoderRow>& rows, DecoderScratch& scratch, float* logits) const;

 private:
  void SelfAttention(const DecoderLayerWeights& layer, int index,
                     const std::vector<DecoderRow>& rows, const float* in,
                     DecoderScratch& s) const;
  void CrossAttention(const DecoderLayerWeights& layer, int index,
                      const std::vector<DecoderRow>& rows, const float* in,
                      DecoderScratch& s) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_DECODER_H_
