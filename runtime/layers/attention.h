// Scaled dot-product attention of one query row over a set of key/value rows.
#ifndef GLOSSA_RUNTIME_LAYERS_ATTENTION_H_
#define GLOSSA_RUNTIME_LAYERS_ATTENTION_H_

#include <cstdint>

#include "ops/ops.h"

namespace glossa {

// out[heads*head_dim] = Σ_t softmax_t(q·k_t) v_t, head by head.
//   q:            [heads*head_dim], the projected query, already multiplied by head_dim^-0.5
//   key_row(t):   pointer to key row t, [heads*head_dim]; likewise value_row(t)
//   scores:       scratch of at least num_keys floats
// The rows come through accessors so that a beam can read its ancestors' cache rows by index.
template <typename KeyRow, typename ValueRow>
void AttendRow(const float* q, int heads, int head_dim, int num_keys,
               KeyRow key_row, ValueRow value_row, float* scores, float* out) {
  for (int h = 0; h < heads; ++h) {
    const int64_t off = static_cast<int64_t>(h) * head_dim;
    const float* qh = q + off;
    for (int t = 0; t < num_keys; ++t) {
      const float* k = key_row(t) + off;
      float dot = 0.0f;
      for (int i = 0; i < head_dim; ++i) dot += qh[i] * k[i];
      scores[t] = dot;
    }
    ops::Softmax(scores, num_keys);
    float* oh = out + off;
    for (int i = 0; i < head_dim; ++i) oh[i] = 0.0f;
    for (int t = 0; t < num_keys; ++t) {
      const float* v = value_row(t) + off;
      const float p = scores[t];
      for (int i = 0; i < head_dim; ++i) oh[i] += p * v[i];
    }
  }
}

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_ATTENTION_H_
