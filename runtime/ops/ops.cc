#include "ops/ops.h"

#include <cmath>
#include <limits>

namespace glossa::ops {

void LayerNorm(float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta,
               float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += row[i];
    const float mean = sum / static_cast<float>(dim);
    float sq = 0.0f;
    for (int64_t i = 0; i < dim; ++i) {
      const float d = row[i] - mean;
      sq += d * d;
    }
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) row[i] = (row[i] - mean) * inv * gamma[i] + beta[i];
  }
}

void Softmax(float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void LogSoftmax(float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
  const float log_sum = std::log(sum);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - max) - log_sum;  // PyTorch's order of operations
}

void EmbedTokens(const float* table, const float* positions, const int* ids, const int* pos,
                 int64_t rows, int64_t dim, float scale, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* e = table + static_cast<int64_t>(ids[r]) * dim;
    const float* p = positions + static_cast<int64_t>(pos[r]) * dim;
    float* o = out + r * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = e[i] * scale + p[i];
  }
}

int64_t ArgMax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace glossa::ops
