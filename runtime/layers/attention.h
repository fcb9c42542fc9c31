// Scaled dot-product attention of one query row over a set of key/value rows.
//
// The binary stays portable (no -march), so the inner kernels are chosen at run time:
//  - AVX-512 (x86-64 with avx512f, checked once): hand-written kernels. A head's query and output
//    (up to 64 floats per pass) stay in registers, and the softmax uses a vectorised exp
//    (Cephes' polynomial, within 1 ulp of std::exp) instead of one libm call per score.
//  - otherwise: portable loops written for auto-vectorisation (16 partial sums per dot product),
//    compiled for AVX2 and the x86-64 baseline with target_clones (where GCC supports it), and
//    ops::Softmax.
// Both change the order of the additions in a dot product relative to a plain left-to-right sum
// (and AVX-512 fuses multiply-adds), so the last bits of a score depend on the CPU, as they already
// do in oneDNN's matmuls. tests/bench/linear_bench.cc compares them with the former scalar loop.
#ifndef GLOSSA_RUNTIME_LAYERS_ATTENTION_H_
#define GLOSSA_RUNTIME_LAYERS_ATTENTION_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/quantize.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define GLOSSA_ATTENTION_X86 1
#include <immintrin.h>

#include "ops/avx512_math.h"
#else
#define GLOSSA_ATTENTION_X86 0
#endif

// Not under ThreadSanitizer: GCC instruments the clones' ifunc resolver, which the dynamic
// loader runs before TSan's runtime is up (every TSan binary crashed at startup).
#if GLOSSA_ATTENTION_X86 && !defined(__clang__) && defined(__ELF__) && !defined(__SANITIZE_THREAD__)
#define GLOSSA_ATTENTION_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GLOSSA_ATTENTION_CLONES
#endif

namespace glossa {
namespace attention_internal {

// Keys and values are visited in chunks of this many rows, whose pointers are gathered first.
constexpr int kChunkRows = 64;

// ---- Portable kernels ----------------------------------------------------------------------

// scores[t] = q · rows[t], for t < n; all vectors have dim floats.
GLOSSA_ATTENTION_CLONES
inline void DotRowsPortable(const float* q, const float* const* rows, int n, int dim,
                            float* scores) {
  constexpr int kLanes = 16;
  const int full = dim - dim % kLanes;
  for (int t = 0; t < n; ++t) {
    const float* k = rows[t];
    float acc[kLanes] = {};
    for (int i = 0; i < full; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) acc[j] += q[i + j] * k[i + j];
    }
    for (int j = 0; j < 8; ++j) acc[j] += acc[j + 8];
    for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
    for (int j = 0; j < 2; ++j) acc[j] += acc[j + 2];
    float dot = acc[0] + acc[1];
    for (int i = full; i < dim; ++i) dot += q[i] * k[i];
    scores[t] = dot;
  }
}

// out[i] += Σ_t p[t] · rows[t][i], for i < dim and t < n.
GLOSSA_ATTENTION_CLONES
inline void AddWeightedRowsPortable(const float* p, const float* const* rows, int n, int dim,
                                    float* out) {
  for (int t = 0; t < n; ++t) {
    const float w = p[t];
    const float* v = rows[t];
    for (int i = 0; i < dim; ++i) out[i] += w * v[i];
  }
}

#if GLOSSA_ATTENTION_X86
// ---- AVX-512 kernels -----------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// reports once inlined into a target("avx512f") function.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

inline bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

using avx512::LaneMask;

// 16 floats of a key or value row: float32, or half precision (quant::FloatToHalf) widened.
__attribute__((target("avx512f"))) inline __m512 Load16(const float* p) {
  return _mm512_loadu_ps(p);
}
__attribute__((target("avx512f"))) inline __m512 Load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Columns [c, c + 16 * kVectors) of the dot products; masks[j] covers vector j of the pass.
template <int kVectors>
__attribute__((target("avx512f"))) inline void DotPassAvx512(const float* q,
                                                             const float* const* rows, int n,
                                                             int c, const __mmask16* masks,
                                                             bool first, float* scores) {
  __m512 qv[kVectors];
  for (int j = 0; j < kVectors; ++j) qv[j] = _mm512_maskz_loadu_ps(masks[j], q + c + 16 * j);
  for (int t = 0; t < n; ++t) {
    const float* k = rows[t] + c;
    // Two independent chains of multiply-adds, then one horizontal sum.
    __m512 a0 = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(masks[0], k));
    __m512 a1 = _mm512_setzero_ps();
    if constexpr (kVectors > 1) a1 = _mm512_mul_ps(qv[1], _mm512_maskz_loadu_ps(masks[1], k + 16));
    if constexpr (kVectors > 2) a0 = _mm512_fmadd_ps(qv[2], _mm512_maskz_loadu_ps(masks[2], k + 32), a0);
    if constexpr (kVectors > 3) a1 = _mm512_fmadd_ps(qv[3], _mm512_maskz_loadu_ps(masks[3], k + 48), a1);
    const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    scores[t] = first ? s : scores[t] + s;
  }
}

__attribute__((target("avx512f"))) inline void DotRowsAvx512(const float* q,
                                                             const float* const* rows, int n,
                                                             int dim, float* scores) {
  for (int c = 0; c < dim; c += 64) {
    const int width = std::min(64, dim - c);
    const __mmask16 masks[4] = {LaneMask(width), LaneMask(width - 16), LaneMask(width - 32),
                                LaneMask(width - 48)};
    const bool first = c == 0;
    switch ((width + 15) / 16) {
      case 1:
        DotPassAvx512<1>(q, rows, n, c, masks, first, scores);
        break;
      case 2:
        DotPassAvx512<2>(q, rows, n, c, masks, first, scores);
        break;
      case 3:
        DotPassAvx512<3>(q, rows, n, c, masks, first, scores);
        break;
      default:
        DotPassAvx512<4>(q, rows, n, c, masks, first, scores);
        break;
    }
  }
}

// out[i] += Σ_t p[t] · rows[t][i]; the (up to) 64 output columns of a pass stay in registers.
__attribute__((target("avx512f"))) inline void AddWeightedRowsAvx512(const float* p,
                                                                     const float* const* rows,
                                                                     int n, int dim, float* out) {
  for (int c = 0; c < dim; c += 64) {
    const int width = std::min(64, dim - c);
    const __mmask16 m0 = LaneMask(width), m1 = LaneMask(width - 16), m2 = LaneMask(width - 32),
                    m3 = LaneMask(width - 48);
    __m512 a0 = _mm512_maskz_loadu_ps(m0, out + c), a1 = _mm512_maskz_loadu_ps(m1, out + c + 16),
           a2 = _mm512_maskz_loadu_ps(m2, out + c + 32),
           a3 = _mm512_maskz_loadu_ps(m3, out + c + 48);
    for (int t = 0; t < n; ++t) {
      const __m512 w = _mm512_set1_ps(p[t]);
      const float* v = rows[t] + c;
      a0 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m0, v), a0);
      a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m1, v + 16), a1);
      a2 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m2, v + 32), a2);
      a3 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m3, v + 48), a3);
    }
    _mm512_mask_storeu_ps(out + c, m0, a0);
    _mm512_mask_storeu_ps(out + c + 16, m1, a1);
    _mm512_mask_storeu_ps(out + c + 32, m2, a2);
    _mm512_mask_storeu_ps(out + c + 48, m3, a3);
  }
}

// NH heads of 64 at once: scores[h * s_stride + t] = q[h * 64, +64) · rows[t][h * 64, +64) for
// h < NH, each computed exactly as DotPassAvx512<4> computes it (same bits); one key row's
// 256·NH floats are read in one go, and the heads' horizontal sums overlap. Rows of half
// precision give the bits of float rows holding their widened values.
template <int NH, typename T>
__attribute__((target("avx512f"))) inline void DotHeadsAvx512(const float* q, const T* const* rows,
                                                              int n, float* scores, int s_stride) {
  __m512 qv[NH][4];
  for (int h = 0; h < NH; ++h) {
    for (int j = 0; j < 4; ++j) qv[h][j] = _mm512_loadu_ps(q + h * 64 + j * 16);
  }
  for (int t = 0; t < n; ++t) {
    const T* k = rows[t];
    for (int h = 0; h < NH; ++h) {
      const T* kh = k + h * 64;
      __m512 a0 = _mm512_mul_ps(qv[h][0], Load16(kh));
      __m512 a1 = _mm512_mul_ps(qv[h][1], Load16(kh + 16));
      a0 = _mm512_fmadd_ps(qv[h][2], Load16(kh + 32), a0);
      a1 = _mm512_fmadd_ps(qv[h][3], Load16(kh + 48), a1);
      scores[h * s_stride + t] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    }
  }
}

// NH heads of 64 at once: out[h * 64 + i] += Σ_t p[h * p_stride + t] · rows[t][h * 64 + i] for
// h < NH. Each output is the same FMA chain over t as AddWeightedRowsAvx512's, so the same bits;
// the 4·NH chains run side by side (one head's 4 chains wait on the FMA latency) and each value
// row's 256·NH floats are read in one go. Rows as DotHeadsAvx512's.
template <int NH, typename T>
__attribute__((target("avx512f"))) inline void AddWeightedHeadsAvx512(const float* p,
                                                                      int p_stride,
                                                                      const T* const* rows,
                                                                      int n, float* out) {
  __m512 acc[NH][4];
  for (int h = 0; h < NH; ++h) {
    for (int j = 0; j < 4; ++j) acc[h][j] = _mm512_loadu_ps(out + h * 64 + j * 16);
  }
  for (int t = 0; t < n; ++t) {
    const T* v = rows[t];
    for (int h = 0; h < NH; ++h) {
      const __m512 w = _mm512_set1_ps(p[h * p_stride + t]);
      for (int j = 0; j < 4; ++j) {
        acc[h][j] = _mm512_fmadd_ps(w, Load16(v + h * 64 + j * 16), acc[h][j]);
      }
    }
  }
  for (int h = 0; h < NH; ++h) {
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(out + h * 64 + j * 16, acc[h][j]);
  }
}

#pragma GCC diagnostic pop
#endif  // GLOSSA_ATTENTION_X86

// ---- Dispatch ------------------------------------------------------------------------------

inline void DotRows(const float* q, const float* const* rows, int n, int dim, float* scores) {
#if GLOSSA_ATTENTION_X86
  if (HasAvx512()) return DotRowsAvx512(q, rows, n, dim, scores);
#endif
  DotRowsPortable(q, rows, n, dim, scores);
}

inline void AddWeightedRows(const float* p, const float* const* rows, int n, int dim,
                            float* out) {
#if GLOSSA_ATTENTION_X86
  if (HasAvx512()) return AddWeightedRowsAvx512(p, rows, n, dim, out);
#endif
  AddWeightedRowsPortable(p, rows, n, dim, out);
}

// The element type of the rows an accessor returns: float, or uint16_t (half precision).
template <typename Row>
using RowElement = std::remove_const_t<std::remove_pointer_t<decltype(std::declval<Row>()(0))>>;

// f(rows, t0, n) for the keys [t0, t0 + n) in chunks of kChunkRows, rows[j] = row(t0 + j) + off.
template <typename Row, typename F>
void ForKeyChunks(int num_keys, Row row, int64_t off, F f) {
  const RowElement<Row>* rows[kChunkRows];
  for (int t0 = 0; t0 < num_keys; t0 += kChunkRows) {
    const int n = std::min(kChunkRows, num_keys - t0);
    for (int j = 0; j < n; ++j) rows[j] = row(t0 + j) + off;
    f(rows, t0, n);
  }
}

// Heads of 64 (every model Glossa loads) with AVX-512 run 4 heads per pass over the keys.
inline bool HeadsOf64(int head_dim) {
#if GLOSSA_ATTENTION_X86
  return head_dim == 64 && HasAvx512();
#else
  (void)head_dim;
  return false;
#endif
}

// f(std::integral_constant<int, N>) for N = min(4, left), left >= 1: heads per pass here, queries
// and key blocks per pass in layers/sentence_attention.cc.
template <typename F>
void UpToFour(int left, F f) {
  switch (std::min(4, left)) {
    case 1: return f(std::integral_constant<int, 1>());
    case 2: return f(std::integral_constant<int, 2>());
    case 3: return f(std::integral_constant<int, 3>());
    default: return f(std::integral_constant<int, 4>());
  }
}

// scores[h * num_keys + t] = softmax over t of q_h · k_t, for every head h.
template <typename KeyRow>
void HeadProbabilities(const float* q, int heads, int head_dim, int num_keys, KeyRow key_row,
                       float* scores) {
#if GLOSSA_ATTENTION_X86
  if (HeadsOf64(head_dim)) {
    for (int h0 = 0; h0 < heads; h0 += 4) {
      float* p = scores + static_cast<int64_t>(h0) * num_keys;
      UpToFour(heads - h0, [&](auto nh) {
        ForKeyChunks(num_keys, key_row, int64_t{h0} * 64, [&](auto rows, int t0, int n) {
          DotHeadsAvx512<nh>(q + h0 * 64, rows, n, p + t0, num_keys);
        });
      });
    }
    for (int h = 0; h < heads; ++h) {
      ops::Softmax(scores + static_cast<int64_t>(h) * num_keys, num_keys);
    }
    return;
  }
#endif
  if constexpr (std::is_same_v<RowElement<KeyRow>, float>) {
    for (int h = 0; h < heads; ++h) {
      const int64_t off = static_cast<int64_t>(h) * head_dim;
      float* sh = scores + static_cast<int64_t>(h) * num_keys;
      ForKeyChunks(num_keys, key_row, off, [&](const float* const* rows, int t0, int n) {
        DotRows(q + off, rows, n, head_dim, sh + t0);
      });
      ops::Softmax(sh, num_keys);
    }
  }
}

// out[h * head_dim + i] = Σ_t scores[h * num_keys + t] · v_t[h * head_dim + i].
template <typename ValueRow>
void WeightedValues(const float* scores, int heads, int head_dim, int num_keys,
                    ValueRow value_row, float* out) {
  std::fill(out, out + static_cast<int64_t>(heads) * head_dim, 0.0f);
#if GLOSSA_ATTENTION_X86
  if (HeadsOf64(head_dim)) {
    for (int h0 = 0; h0 < heads; h0 += 4) {
      const float* p = scores + static_cast<int64_t>(h0) * num_keys;
      UpToFour(heads - h0, [&](auto nh) {
        ForKeyChunks(num_keys, value_row, int64_t{h0} * 64, [&](auto rows, int t0, int n) {
          AddWeightedHeadsAvx512<nh>(p + t0, num_keys, rows, n, out + h0 * 64);
        });
      });
    }
    return;
  }
#endif
  if constexpr (std::is_same_v<RowElement<ValueRow>, float>) {
    for (int h = 0; h < heads; ++h) {
      const int64_t off = static_cast<int64_t>(h) * head_dim;
      const float* p = scores + static_cast<int64_t>(h) * num_keys;
      ForKeyChunks(num_keys, value_row, off, [&](const float* const* rows, int t0, int n) {
        AddWeightedRows(p + t0, rows, n, head_dim, out + off);
      });
    }
  }
}

// Rows [0, n) of dim half-precision values, widened into one float array.
template <typename Row>
std::vector<float> Widened(Row row, int n, int dim) {
  std::vector<float> rows(static_cast<size_t>(n) * dim);
  for (int t = 0; t < n; ++t) {
    const auto* from = row(t);
    float* to = rows.data() + static_cast<size_t>(t) * dim;
    for (int i = 0; i < dim; ++i) to[i] = quant::HalfToFloat(from[i]);
  }
  return rows;
}

}  // namespace attention_internal

// out[heads*head_dim] = Σ_t softmax_t(q·k_t) v_t, for each head.
//   q:            [heads*head_dim], the projected query, already multiplied by head_dim^-0.5
//   key_row(t):   pointer to key row t, [heads*head_dim]; likewise value_row(t). Rows may be
//                 float32 or half precision (uint16_t, quant::FloatToHalf): the result is then
//                 that of float rows holding the widened values, bit for bit.
//   scores:       scratch of at least heads * num_keys floats
// The rows come through accessors so that a beam can read its ancestors' cache rows by index.
// Heads of 64 with AVX-512 take 4 heads per pass over the key and value rows (each row's
// 1 KB read in one go, the heads' sums side by side): the same operations per head in the same
// order as one head at a time, so the same bits (AttentionTest.HeadsOf64AsOneHeadAtATime);
// demo decoder steps at batch 32 ran 2-3% faster.
template <typename KeyRow, typename ValueRow>
void AttendRow(const float* q, int heads, int head_dim, int num_keys, KeyRow key_row,
               ValueRow value_row, float* scores, float* out) {
  if (heads <= 0 || head_dim <= 0) return;
  if (num_keys <= 0) return std::fill(out, out + static_cast<int64_t>(heads) * head_dim, 0.0f);
  if constexpr (!std::is_same_v<attention_internal::RowElement<KeyRow>, float>) {
    if (!attention_internal::HeadsOf64(head_dim)) {  // the kernels that widen need AVX-512
      const int dim = heads * head_dim;
      const std::vector<float> keys = attention_internal::Widened(key_row, num_keys, dim),
                               values = attention_internal::Widened(value_row, num_keys, dim);
      return AttendRow(
          q, heads, head_dim, num_keys, [&](int t) { return keys.data() + int64_t{t} * dim; },
          [&](int t) { return values.data() + int64_t{t} * dim; }, scores, out);
    }
  }
  attention_internal::HeadProbabilities(q, heads, head_dim, num_keys, key_row, scores);
  attention_internal::WeightedValues(scores, heads, head_dim, num_keys, value_row, out);
}

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_ATTENTION_H_
