// The Transformer decoder, one step at a time for any set of sequences: greedy sequences and beam
// hypotheses of different requests side by side, each row with its own position, cache slot and
// source. A scheduler can add or drop rows between any two steps.
#ifndef GLOSSA_RUNTIME_LAYERS_DECODER_H_
#define GLOSSA_RUNTIME_LAYERS_DECODER_H_

#include <cstdint>
#include <vector>

#include "layers/encoder.h"
#include "layers/kv_cache.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/ops.h"

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
  // Non-null: Step writes this row's cross-attention probabilities, averaged over the heads, of
  // every layer: [decoder_layers, source length] (Hugging Face's output_attentions averaged
  // over heads; the row aligns the token it produces).
  float* cross_attention = nullptr;
};

// Buffers reused across steps; they grow to the largest step seen and are never shrunk.
struct DecoderScratch {
  std::vector<int> ids, positions;
  std::vector<float> x, h, q, k, v, a, ffn, scores;
  std::vector<ops::SoftmaxAccumulator> softmax;
};

// What Step derives from each row's logits while they are in cache. Arrays have one entry per
// row (top: top_k per row).
struct LogitsSummary {
  ops::ArgMaxLogSumExp* stats = nullptr;  // ops::ComputeArgMaxLogSumExp of the row
  int top_k = 0;                          // with top_k > 0, the row's top_k largest logits
  ops::ScoredId* top = nullptr;           // (ops::UpdateTopK's list: raw logits, ids)
  int* top_count = nullptr;
  const uint8_t* write = nullptr;  // non-zero: write the row's logits (null: every row)
  // Every row wants only its argmax over the ids not excluded (greedy without a score): with
  // the model's ArgMaxScreen and few enough rows, Step may find it from the screen instead of
  // the logits. It then sets *screened and only stats[r].index and stats[r].lse.max (the
  // argmax's logit) are meaningful. Row r excludes excluded[excluded_offsets[r] ..
  // excluded_offsets[r + 1]). From the logits, Step skips the normaliser: stats[r].lse.log_sum
  // is only finite or not, as the normaliser would be (ops::ComputeBlockArgMax).
  bool argmax_only = false;
  // No row's logits are wanted (every row takes a forced token): Step runs the layers, which
  // fill the KV cache, and computes no logits nor any of the above.
  bool no_logits = false;
  const int* excluded = nullptr;
  const int* excluded_offsets = nullptr;
  bool* screened = nullptr;
};

// The decoder layer whose cross-attention, averaged over its heads, aligns each produced token
// to a source position (DecoderRow::cross_attention; Hypothesis::alignment): the second to last
// (the only one with a single layer). docs/alignment.md says how it was chosen.
int AlignmentLayer(const ModelConfig& config);

class Decoder {
 public:
  Decoder(const ModelConfig& config, const ModelWeights& weights);

  // Fills batch.cross_kv: every layer's cross-attention keys and values, computed once. With
  // int8_fast layers and heads of 64 on AVX-512, they are kept in half precision instead
  // (batch.cross_kv_half, where every value fits): each step reads them all from memory (demo
  // greedy batch 32: 5.8 MB a step, more than L2), and half the bytes took ~7% off its decoder
  // steps. Their 11 significant bits are more than the 8 of int8_fast's activation codes;
  // float32, bfloat16 and int8 keep float32.
  void PrecomputeCrossKv(EncodedBatch& batch) const;

  // One step for every row: writes each row's K/V into its cache and the next-token logits
  // (final_logits_bias included) into logits[rows.size(), target_vocab_size]. With a summary,
  // Step also fills it as the output projection produces the logits block by block
  // (Linear::ForwardInColumnBlocks), from cache, and writes out only the rows it marks.
  void Step(const std::vector<DecoderRow>& rows, DecoderScratch& scratch, float* logits,
            const LogitsSummary* summary = nullptr) const;

  // One row's logits of the last Step on this scratch again, bit for bit, into
  // out[target_vocab_size] (for a row the summary could not decide).
  void RowLogits(const DecoderScratch& scratch, int64_t row, float* out) const;

 private:
  void SelfAttention(const DecoderLayerWeights& layer, int index,
                     const std::vector<DecoderRow>& rows, const float* in,
                     DecoderScratch& s) const;
  // PrecomputeCrossKv in half precision, a layer at a time (no float32 copy of them all); false
  // (batch unchanged) where a value does not fit.
  bool PrecomputeCrossKvHalf(EncodedBatch& batch) const;
  void CrossAttention(const DecoderLayerWeights& layer, int index,
                      const std::vector<DecoderRow>& rows, const float* in,
                      DecoderScratch& s) const;

  // The summary of an argmax-only step from the screen; false (nothing filled) where it cannot.
  bool Screen(const float* x, int64_t n, const LogitsSummary& summary) const;
  // The output projection of x[n, d_model] in column blocks, filling `summary`.
  void Summarize(const float* x, int64_t n, float* logits, const LogitsSummary& summary,
                 DecoderScratch& s) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  bool half_cross_kv_ = false;  // see PrecomputeCrossKv
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_DECODER_H_
