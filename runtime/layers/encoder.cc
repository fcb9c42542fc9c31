#include "layers/encoder.h"

#include <algorithm>
#include <cmath>

#include "layers/attention.h"
#include "ops/ops.h"

namespace glossa {

Encoder::Encoder(const ModelConfig& config, const ModelWeights& weights)
    : config_(config), weights_(weights) {}

std::shared_ptr<EncodedBatch> Encoder::Encode(const std::vector<std::vector<int>>& sources) const {
  const int64_t d = config_.d_model;
  auto batch = std::make_shared<EncodedBatch>();
  batch->d_model = d;
  batch->decoder_layers = config_.decoder_layers;
  std::vector<int> ids, positions;
  int max_len = 0;
  for (const auto& src : sources) {
    batch->offsets.push_back(static_cast<int>(ids.size()));
    batch->lengths.push_back(static_cast<int>(src.size()));
    max_len = std::max(max_len, static_cast<int>(src.size()));
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
  std::vector<float> h(n * d), q(n * d), k(n * d), v(n * d), a(n * d);
  std::vector<float> ffn(n * config_.encoder_ffn_dim), scores(int64_t{heads} * max_len);
  for (const EncoderLayerWeights& layer : weights_.encoder_layers) {
    // Self-attention block: x += out(attn(norm?(x))), then post-norm.
    const float* in = x.data();
    if (pre) {
      h = x;
      norm(layer.self_attn_norm, h.data());
      in = h.data();
    }
    layer.self_attn.q->Forward(in, n, q.data());
    for (float& e : q) e *= q_scale;
    layer.self_attn.k->Forward(in, n, k.data());
    layer.self_attn.v->Forward(in, n, v.data());
    for (size_t s = 0; s < sources.size(); ++s) {
      const int64_t off = batch->offsets[s];
      const int len = batch->lengths[s];
      for (int t = 0; t < len; ++t) {
        AttendRow(
            q.data() + (off + t) * d, heads, head_dim, len,
            [&](int j) { return k.data() + (off + j) * d; },
            [&](int j) { return v.data() + (off + j) * d; }, scores.data(), a.data() + (off + t) * d);
      }
    }
    layer.self_attn.out->Forward(a.data(), n, x.data(), /*accumulate=*/true);
    if (!pre) norm(layer.self_attn_norm, x.data());

    // Feed-forward block.
    in = x.data();
    if (pre) {
      h = x;
      norm(layer.final_norm, h.data());
      in = h.data();
    }
    layer.fc1->Forward(in, n, ffn.data());
    layer.fc2->Forward(ffn.data(), n, x.data(), /*accumulate=*/true);
    if (!pre) norm(layer.final_norm, x.data());
  }
  if (config_.final_layer_norm) norm(weights_.encoder.final_norm, x.data());
  return batch;
}

}  // namespace glossa
