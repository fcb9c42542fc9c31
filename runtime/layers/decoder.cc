#include "layers/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "layers/attention.h"
#include "ops/gemv.h"
#include "ops/ops.h"
#include "ops/quantize.h"

namespace glossa {
namespace {

void Grow(std::vector<float>& v, int64_t size) {
  if (static_cast<int64_t>(v.size()) < size) v.resize(size);
}

}  // namespace

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights)
    : config_(config), weights_(weights) {
  half_cross_kv_ =
      !weights.decoder_layers.empty() && config.decoder_heads > 0 &&
      weights.decoder_layers[0].cross_attn.k->compute_type() == ComputeType::kInt8Fast &&
      attention_internal::HeadsOf64(static_cast<int>(config.d_model / config.decoder_heads));
}

void Decoder::PrecomputeCrossKv(EncodedBatch& batch) const {
  batch.cross_kv.reset();
  batch.cross_kv_half.reset();
  // Half precision where it applies (see decoder.h); float32 otherwise, and for a batch with a
  // value beyond half's range.
  if (half_cross_kv_ && PrecomputeCrossKvHalf(batch)) return;
  const int64_t n = batch.total_rows, d = config_.d_model;
  batch.cross_kv.reset(new float[static_cast<size_t>(config_.decoder_layers * 2 * n * d)]);
  for (int l = 0; l < config_.decoder_layers; ++l) {
    const AttentionWeights& w = weights_.decoder_layers[l].cross_attn;
    w.k->Forward(batch.hidden.data(), n, batch.cross_kv.get() + (int64_t{l} * 2) * n * d);
    w.v->Forward(batch.hidden.data(), n, batch.cross_kv.get() + (int64_t{l} * 2 + 1) * n * d);
  }
}

bool Decoder::PrecomputeCrossKvHalf(EncodedBatch& batch) const {
  const int64_t n = batch.total_rows, d = config_.d_model, layer_size = 2 * n * d;
  std::unique_ptr<uint16_t[]> half(new uint16_t[config_.decoder_layers * layer_size]);
  thread_local std::vector<float> layer;  // one layer's keys and values in float32
  if (static_cast<int64_t>(layer.size()) < layer_size) layer.resize(layer_size);
  for (int l = 0; l < config_.decoder_layers; ++l) {
    const AttentionWeights& w = weights_.decoder_layers[l].cross_attn;
    w.k->Forward(batch.hidden.data(), n, layer.data());
    w.v->Forward(batch.hidden.data(), n, layer.data() + n * d);
    if (!quant::FloatToHalf(layer.data(), layer_size, half.get() + l * layer_size)) return false;
  }
  if (layer.size() * sizeof(float) > (size_t{8} << 20)) std::vector<float>().swap(layer);
  batch.cross_kv_half = std::move(half);
  return true;
}

void Decoder::SelfAttention(const DecoderLayerWeights& layer, int index,
                            const std::vector<DecoderRow>& rows, const float* in,
                            DecoderScratch& s) const {
  const int64_t n = static_cast<int64_t>(rows.size()), d = config_.d_model;
  const int heads = config_.decoder_heads, head_dim = static_cast<int>(d / heads);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  layer.self_attn.q->Forward(in, n, s.q.data());
  for (int64_t i = 0; i < n * d; ++i) s.q[i] *= q_scale;
  layer.self_attn.k->Forward(in, n, s.k.data());
  layer.self_attn.v->Forward(in, n, s.v.data());
  for (int64_t r = 0; r < n; ++r) {
    const DecoderRow& row = rows[r];
    std::memcpy(row.cache->Key(index, row.slot, row.position), s.k.data() + r * d, d * 4);
    std::memcpy(row.cache->Value(index, row.slot, row.position), s.v.data() + r * d, d * 4);
  }
  for (int64_t r = 0; r < n; ++r) {
    const DecoderRow& row = rows[r];
    KvCache* cache = row.cache;
    AttendRow(
        s.q.data() + r * d, heads, head_dim, row.position + 1,
        [&](int t) { return cache->Key(index, row.ancestry[t], t); },
        [&](int t) { return cache->Value(index, row.ancestry[t], t); }, s.scores.data(),
        s.a.data() + r * d);
  }
}

namespace {

// out[t] = Σ_h probabilities[h * keys + t] / heads, summed in head order (as torch's mean).
void HeadMean(const float* probabilities, int heads, int keys, float* out) {
  std::fill(out, out + keys, 0.0f);
  for (int h = 0; h < heads; ++h) {
    const float* p = probabilities + int64_t{h} * keys;
    for (int t = 0; t < keys; ++t) out[t] += p[t];
  }
  for (int t = 0; t < keys; ++t) out[t] /= static_cast<float>(heads);
}

}  // namespace

int AlignmentLayer(const ModelConfig& config) {
  return std::max(0, config.decoder_layers - 2);
}

void Decoder::CrossAttention(const DecoderLayerWeights& layer, int index,
                             const std::vector<DecoderRow>& rows, const float* in,
                             DecoderScratch& s) const {
  const int64_t n = static_cast<int64_t>(rows.size()), d = config_.d_model;
  const int heads = config_.decoder_heads, head_dim = static_cast<int>(d / heads);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  layer.cross_attn.q->Forward(in, n, s.q.data());
  for (int64_t i = 0; i < n * d; ++i) s.q[i] *= q_scale;
  for (int64_t r = 0; r < n; ++r) {
    const EncodedBatch& batch = *rows[r].source_batch;
    const int source = rows[r].source;
    auto attend = [&](const auto* keys, const auto* values) {
      AttendRow(
          s.q.data() + r * d, heads, head_dim, batch.lengths[source],
          [&](int t) { return keys + t * d; }, [&](int t) { return values + t * d; },
          s.scores.data(), s.a.data() + r * d);
    };
    if (batch.cross_kv_half != nullptr) {
      attend(batch.CrossKeyHalf(index, source), batch.CrossValueHalf(index, source));
    } else {
      attend(batch.CrossKey(index, source), batch.CrossValue(index, source));
    }
    if (rows[r].cross_attention != nullptr) {
      const int keys = batch.lengths[source];
      HeadMean(s.scores.data(), heads, keys, rows[r].cross_attention + int64_t{index} * keys);
    }
  }
}

void Decoder::Step(const std::vector<DecoderRow>& rows, DecoderScratch& s, float* logits,
                   const LogitsSummary* summary) const {
  const int64_t n = static_cast<int64_t>(rows.size()), d = config_.d_model;
  if (n == 0) return;
  const gemv::StreamingScope streaming;  // every weight comes from memory: see ops/gemv.h
  int max_keys = 1;
  s.ids.resize(n);
  s.positions.resize(n);
  for (int64_t r = 0; r < n; ++r) {
    s.ids[r] = rows[r].token;
    s.positions[r] = PositionRow(config_, rows[r].token, rows[r].position);
    max_keys = std::max({max_keys, rows[r].position + 1,
                         rows[r].source_batch->lengths[rows[r].source]});
  }
  for (auto* buf : {&s.x, &s.h, &s.q, &s.k, &s.v, &s.a}) Grow(*buf, n * d);
  Grow(s.ffn, n * config_.decoder_ffn_dim);
  Grow(s.scores, int64_t{config_.decoder_heads} * max_keys);

  float* x = s.x.data();
  const float scale = config_.scale_embedding ? std::sqrt(static_cast<float>(d)) : 1.0f;
  ops::EmbedTokens(weights_.decoder.embed_tokens, weights_.decoder.embed_positions, s.ids.data(),
                   s.positions.data(), n, d, scale, x);
  auto norm = [&](const LayerNormWeights& w, float* rows_data) {
    ops::LayerNorm(rows_data, n, d, w.gamma, w.beta, config_.layer_norm_eps);
  };
  if (config_.layernorm_embedding) norm(weights_.decoder.embedding_norm, x);
  const bool pre = config_.normalize_before;
  // Input of a sub-block: x itself (post-norm) or a normalised copy of it (pre-norm).
  auto block_input = [&](const LayerNormWeights& w) -> const float* {
    if (!pre) return x;
    std::memcpy(s.h.data(), x, n * d * 4);
    norm(w, s.h.data());
    return s.h.data();
  };

  for (int l = 0; l < config_.decoder_layers; ++l) {
    const DecoderLayerWeights& layer = weights_.decoder_layers[l];
    SelfAttention(layer, l, rows, block_input(layer.self_attn_norm), s);
    layer.self_attn.out->Forward(s.a.data(), n, x, /*accumulate=*/true);
    if (!pre) norm(layer.self_attn_norm, x);

    CrossAttention(layer, l, rows, block_input(layer.cross_attn_norm), s);
    layer.cross_attn.out->Forward(s.a.data(), n, x, /*accumulate=*/true);
    if (!pre) norm(layer.cross_attn_norm, x);

    layer.fc1->Forward(block_input(layer.final_norm), n, s.ffn.data());
    layer.fc2->Forward(s.ffn.data(), n, x, /*accumulate=*/true);
    if (!pre) norm(layer.final_norm, x);
  }
  if (summary != nullptr && summary->no_logits) return;
  if (config_.final_layer_norm) norm(weights_.decoder.final_norm, x);
  if (summary == nullptr) {
    weights_.lm_head->EnsurePacked();
    return weights_.lm_head->Forward(x, n, logits);
  }
  if (summary->screened != nullptr) *summary->screened = false;
  if (summary->argmax_only && Screen(x, n, *summary)) return;
  // Every logit is needed. A projection whose packing waits for this (with a screen) starts its
  // packed copy now, on a thread of its own, and this step's rows (and the next steps', until
  // the copy is done) come from the plain weights, slab by slab (ops/linear.h); not when the
  // screen exists and merely could not decide this step: a greedy-only process never makes
  // the packed copy.
  const bool undecided = summary->argmax_only && n <= ArgMaxScreen::kMaxRows &&
                         weights_.lm_head_screen != nullptr &&
                         weights_.lm_head_screen->IfBuilt() != nullptr;
  if (!undecided) weights_.lm_head->StartPacking();
  Summarize(x, n, logits, *summary, s);
}

bool Decoder::Screen(const float* x, int64_t n, const LogitsSummary& summary) const {
  if (weights_.lm_head_screen == nullptr || n > ArgMaxScreen::kMaxRows ||
      summary.screened == nullptr) {
    return false;
  }
  const ArgMaxScreen* screen = weights_.lm_head_screen->Get();
  if (screen == nullptr) return false;
  int64_t index[ArgMaxScreen::kMaxRows];
  float value[ArgMaxScreen::kMaxRows];
  if (!screen->ArgMax(x, n, summary.excluded, summary.excluded_offsets, index, value)) return false;
  for (int64_t r = 0; r < n; ++r) {
    summary.stats[r] = ops::ArgMaxLogSumExp();
    summary.stats[r].index = index[r];
    summary.stats[r].lse.max = value[r];
  }
  *summary.screened = true;
  return true;
}

void Decoder::Summarize(const float* x, int64_t n, float* logits, const LogitsSummary& summary,
                        DecoderScratch& s) const {
  static_assert(Linear::kColumnBlock == ops::kSoftmaxBlock);
  const int64_t vocab = weights_.lm_head->out();
  const int k = summary.top_k;
  s.softmax.assign(n, ops::SoftmaxAccumulator());  // within capacity once warm
  if (k > 0) std::fill(summary.top_count, summary.top_count + n, 0);
  weights_.lm_head->ForwardInColumnBlocks(
      x, n, logits,
      [&](int64_t first_row, int64_t piece_rows, int64_t first_col, int64_t cols,
          const float* block, int64_t stride) {
        for (int64_t i = 0; i < piece_rows; ++i) {
          const int64_t r = first_row + i;
          const float* values = block + i * stride;
          s.softmax[r].Add(summary.argmax_only ? ops::ComputeBlockArgMax(values, cols)
                                               : ops::ComputeBlockStats(values, cols));
          if (k > 0) {
            summary.top_count[r] = ops::UpdateTopK(values, cols, static_cast<int32_t>(first_col), k,
                                                   summary.top + r * k, summary.top_count[r]);
          }
          float* to = logits + r * vocab + first_col;
          if ((summary.write == nullptr || summary.write[r] != 0) && to != values) {
            std::memcpy(to, values, cols * sizeof(float));
          }
        }
      });
  for (int64_t r = 0; r < n; ++r) summary.stats[r] = s.softmax[r].Result();
}

void Decoder::RowLogits(const DecoderScratch& s, int64_t row, float* out) const {
  weights_.lm_head->Forward(s.x.data() + row * config_.d_model, 1, out);
}

}  // namespace glossa
