// Small pure functions over dense float rows. They know nothing of models.
#ifndef GLOSSA_RUNTIME_OPS_OPS_H_
#define GLOSSA_RUNTIME_OPS_OPS_H_

#include <cstdint>

namespace glossa::ops {

// x[rows, dim] = (x - mean) / sqrt(var + eps) * gamma + beta, per row (biased variance).
void LayerNorm(float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta,
               float eps);

// In place over one row: x = softmax(x).
void Softmax(float* x, int64_t n);

// In place over one row: x = log_softmax(x) = x - max - log(sum(exp(x - max))).
void LogSoftmax(float* x, int64_t n);

// out[i, :] = table[ids[i], :] * scale + positions[pos[i], :]  (token embedding plus position).
void EmbedTokens(const float* table, const float* positions, const int* ids, const int* pos,
                 int64_t rows, int64_t dim, float scale, float* out);

// Index of the largest value (the first one on ties, like torch.argmax).
int64_t ArgMax(const float* x, int64_t n);

}  // namespace glossa::ops

#endif  // GLOSSA_RUNTIME_OPS_OPS_H_
