// Decoding with the KV cache equals decoding that recomputes the whole prefix at every step.
// The reference below shares only the projections (Linear, tested in ops_test) with production:
// it embeds the full prefix, runs causal self-attention over all positions and recomputes the
// cross-attention keys/values from the encoder output, with no cache, no ancestry, no Step().
#include <cmath>

#include "common/test_util.h"
#include "ops/ops.h"

namespace glossa {
namespace {

using Matrix = std::vector<float>;  // row-major [rows, cols]

Matrix Project(const Linear& l, const Matrix& x, int64_t rows) {
  Matrix y(rows * l.out());
  l.Forward(x.data(), rows, y.data());
  return y;
}

// Attention of every query row i over key rows [0, limit(i)), head by head, in double.
Matrix Attention(const Matrix& q, const Matrix& k, const Matrix& v, int64_t q_rows,
                 int64_t k_rows, int64_t d, int heads, bool causal) {
  const int64_t hd = d / heads;
  Matrix out(q_rows * d, 0.0f);
  for (int64_t i = 0; i < q_rows; ++i) {
    const int64_t limit = causal ? i + 1 : k_rows;
    for (int h = 0; h < heads; ++h) {
      std::vector<double> s(limit);
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < limit; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e) {
          dot += double{q[i * d + h * hd + e]} / std::sqrt(double(hd)) * k[j * d + h * hd + e];
        }
        s[j] = dot;
        max = std::max(max, dot);
      }
      for (double& e : s) sum += (e = std::exp(e - max));
      for (int64_t j = 0; j < limit; ++j) {
        for (int64_t e = 0; e < hd; ++e) out[i * d + h * hd + e] += s[j] / sum * v[j * d + h * hd + e];
      }
    }
  }
  return out;
}

void AddAndNorm(Matrix& x, const Matrix& y, const LayerNormWeights& n, int64_t rows, int64_t d) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  ops::LayerNorm(x.data(), rows, d, n.gamma, n.beta, 1e-5f);
}

// Logits of the last prefix position, recomputed from scratch (post-norm Marian).
std::vector<float> RecomputeLastLogits(const Model& model, const EncodedBatch& enc,
                                       const std::vector<int>& prefix) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t d = c.d_model, n = prefix.size(), s = enc.total_rows;
  Matrix x(n * d);
  std::vector<int> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int>(i);
  ops::EmbedTokens(w.decoder.embed_tokens, w.decoder.embed_positions, prefix.data(), pos.data(),
                   n, d, std::sqrt(float(d)), x.data());
  for (const DecoderLayerWeights& l : w.decoder_layers) {
    Matrix a = Attention(Project(*l.self_attn.q, x, n), Project(*l.self_attn.k, x, n),
                         Project(*l.self_attn.v, x, n), n, n, d, c.decoder_heads, true);
    AddAndNorm(x, Project(*l.self_attn.out, a, n), l.self_attn_norm, n, d);
    a = Attention(Project(*l.cross_attn.q, x, n), Project(*l.cross_attn.k, enc.hidden, s),
                  Project(*l.cross_attn.v, enc.hidden, s), n, s, d, c.decoder_heads, false);
    AddAndNorm(x, Project(*l.cross_attn.out, a, n), l.cross_attn_norm, n, d);
    AddAndNorm(x, Project(*l.fc2, Project(*l.fc1, x, n), n), l.final_norm, n, d);
  }
  Matrix last(x.end() - d, x.end());
  return Project(*w.lm_head, last, 1);
}

TEST(RecomputeTest, CachedDecodingEqualsFullRecompute) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  ASSERT_FALSE(model->config().normalize_before) << "the reference is post-norm";
  const auto golden = testing::ReadGolden("greedy");
  double worst = 0;
  int steps = 0;
  for (int i = 0; i < 20; ++i) {
    const auto& g = golden[i];
    std::vector<int> prefix = {model->config().decoder_start_id};
    prefix.insert(prefix.end(), g.out_ids.begin(), g.out_ids.end() - 1);
    const auto cached = testing::TeacherForcedLogits(*model, g.src_ids, prefix);
    auto enc = model->encoder().Encode({g.src_ids});
    for (size_t t = 0; t < prefix.size(); ++t) {
      const std::vector<int> sub(prefix.begin(), prefix.begin() + t + 1);
      const auto full = RecomputeLastLogits(*model, *enc, sub);
      for (size_t v = 0; v < full.size(); ++v) {
        const double diff = std::abs(double{full[v]} - cached[t][v]);
        worst = std::max(worst, diff);
        ASSERT_LE(diff, 1e-4) << "sentence " << i << " step " << t << " token " << v;
      }
      EXPECT_EQ(ops::ArgMax(full.data(), full.size()), ops::ArgMax(cached[t].data(), full.size()))
          << "sentence " << i << " step " << t;
      ++steps;
    }
  }
  std::printf("compared %d decoder steps of 20 sentences; largest logit difference %.3g\n", steps,
              worst);
}

}  // namespace
}  // namespace glossa
