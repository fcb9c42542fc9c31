#include "layers/encoder.h"

#include <algorithm>
#include <cmath>

#include "layers/sentence_attention.h"
#include "ops/ops.h"

namespace glossa {
namespace {

// Each thread's working buffers, kept from call to call: a worker encodes a few sources every
// few steps, and fresh zero-filled buffers cost it memset and page faults (3-6% of a demo greedy
// batch-32 run on one core). Buffers only grow; past kKeepBytes they are let go after the call,
// so a rare long batch does not pin its memory.
struct EncoderScratch {
  static constexpr int64_t kKeepBytes = int64_t{8} << 20;
  std::vector<float> h, q, k, v, a, ffn, scores;

  void Size(int64_t rows, int64_t d, int64_t ffn_dim) {  // scores: AttendSentence grows it
    for (std::vector<float>* b : {&h, &q, &k, &v, &a}) Grow(*b, rows * d);
    Grow(ffn, rows * ffn_dim);
  }
  void ReleaseIfLarge() {
    int64_t floats = 0;
    for (const std::vector<float>* b : {&h, &q, &k, &v, &a, &ffn, &scores}) floats += b->size();
    if (floats * 4 > kKeepBytes) *this = EncoderScratch();
  }

 private:
  static void Grow(std::vector<float>& b, int64_t size) {
    if (static_cast<int64_t>(b.size()) < size) b.resize(size);
  }
};

}  // namespace

Encoder::Encoder(const ModelConfig& config, const ModelWeights& weights)
    : config_(config), weights_(weights) {}

std::shared_ptr<EncodedBatch> Encoder::Encode(const std::vector<std::vector<int>>& sources) const {
  const int64_t d = config_.d_model;
  auto batch = std::make_shared<EncodedBatch>();
  batch->d_model = d;
  batch->decoder_layers = config_.decoder_layers;
  std::vector<int> ids, positions;
  for (const auto& src : sources) {
    batch->offsets.push_back(static_cast<int>(ids.size()));
    batch->lengths.push_back(static_cast<int>(src.size()));
    int non_pad = 0;  // fairseq's make_positions: pad tokens do not advance the positions
    for (int id : src) {
      ids.push_back(id);
      positions.push_back(PositionRow(config_, id, non_pad));
      if (!(config_.positions_from_pad && id == config_.pad_id)) ++non_pad;
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  batch->total_rows = n;
  std::vector<float>& x = batch->hidden;
  x.resize(n * d);
  const float scale = config_.scale_embedding ? std::sqrt(static_cast<float>(d)) : 1.0f;
  ops::EmbedTokens(weights_.encoder.embed_tokens, weights_.encoder.embed_positions, ids.data(),
                   positions.data(), n, d, scale, x.data());
  auto norm = [&](const LayerNormWeights& w, float* rows) {
    ops::LayerNorm(rows, n, d, w.gamma, w.beta, config_.layer_norm_eps);
  };
  if (config_.layernorm_embedding) norm(weights_.encoder.embedding_norm, x.data());

  const int heads = config_.encoder_heads;
  const int head_dim = static_cast<int>(d / heads);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const bool pre = config_.normalize_before;
  thread_local EncoderScratch scratch;
  scratch.Size(n, d, config_.encoder_ffn_dim);
  float *h = scratch.h.data(), *q = scratch.q.data(), *k = scratch.k.data(),
        *v = scratch.v.data(), *a = scratch.a.data(), *ffn = scratch.ffn.data();
  for (const EncoderLayerWeights& layer : weights_.encoder_layers) {
    // Self-attention block: x += out(attn(norm?(x))), then post-norm.
    const float* in = x.data();
    if (pre) {
      std::copy(x.begin(), x.end(), h);
      norm(layer.self_attn_norm, h);
      in = h;
    }
    layer.self_attn.q->Forward(in, n, q);
    for (int64_t i = 0; i < n * d; ++i) q[i] *= q_scale;
    layer.self_attn.k->Forward(in, n, k);
    layer.self_attn.v->Forward(in, n, v);
    for (size_t s = 0; s < sources.size(); ++s) {
      const int64_t off = batch->offsets[s] * d;
      AttendSentence(q + off, k + off, v + off, batch->lengths[s], heads, head_dim, d,
                     scratch.scores, a + off);
    }
    layer.self_attn.out->Forward(a, n, x.data(), /*accumulate=*/true);
    if (!pre) norm(layer.self_attn_norm, x.data());

    // Feed-forward block.
    in = x.data();
    if (pre) {
      std::copy(x.begin(), x.end(), h);
      norm(layer.final_norm, h);
      in = h;
    }
    layer.fc1->Forward(in, n, ffn);
    layer.fc2->Forward(ffn, n, x.data(), /*accumulate=*/true);
    if (!pre) norm(layer.final_norm, x.data());
  }
  if (config_.final_layer_norm) norm(weights_.encoder.final_norm, x.data());
  scratch.ReleaseIfLarge();
  return batch;
}

}  // namespace glossa
