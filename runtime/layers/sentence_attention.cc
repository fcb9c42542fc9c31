#include "layers/sentence_attention.h"

#include <algorithm>
#include <cmath>

#include "layers/attention.h"
#include "ops/avx512_math.h"
#include "ops/ops.h"

namespace glossa {
namespace {

#if GLOSSA_ATTENTION_X86
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (the reductions, Exp16's
// rounding and scaling), which it reports as uninitialized once inlined here.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

constexpr int kHeadDim = 64;
constexpr int kLanes = 16;
constexpr int kQueries = 4;    // queries per block
constexpr int kKeyBlocks = 4;  // 16-key blocks per pass of ScoreBlock
static_assert(kQueries == 4 && kKeyBlocks == 4, "passes are dispatched by UpToFour");

// Row r of a block of R scores whose NB vectors hold every key (the first `len` lanes count):
// the softmax, into s, as ops::Softmax computes it from the stored scores (the same bits).
template <int NB>
__attribute__((target("avx512f"))) void SoftmaxInRegisters(__m512* x, int len, float* s) {
  __mmask16 masks[NB];
  __m512 max = _mm512_set1_ps(-INFINITY);
  for (int b = 0; b < NB; ++b) {
    masks[b] = avx512::LaneMask(len - kLanes * b);
    max = _mm512_mask_max_ps(max, masks[b], max, x[b]);
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(max));
  __m512 sum = _mm512_setzero_ps();
  for (int b = 0; b < NB; ++b) {
    x[b] = avx512::Exp16(_mm512_sub_ps(x[b], vmax));
    sum = _mm512_mask_add_ps(sum, masks[b], sum, x[b]);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int b = 0; b < NB; ++b) _mm512_storeu_ps(s + kLanes * b, _mm512_mul_ps(x[b], inv));
}

// s[r * ls + j] = q_r · key j for the R queries q_r = q + r * stride and the keys
// [16 * b0, 16 * (b0 + NB)), from kt, one head's keys transposed: kt[d * ls + j] (64 rows).
// With softmax_len (b0 0 and NB vectors holding every key), s holds each row's softmax over
// its first softmax_len scores instead.
template <int R, int NB>
__attribute__((target("avx512f"))) void ScoreBlock(const float* q, int64_t stride, const float* kt,
                                                   int ls, int b0, float* s, int softmax_len) {
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  }
  for (int d = 0; d < kHeadDim; ++d) {
    const float* row = kt + int64_t{d} * ls + kLanes * b0;
    __m512 keys[NB];
    for (int b = 0; b < NB; ++b) keys[b] = _mm512_loadu_ps(row + kLanes * b);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(q[r * stride + d]);
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(x, keys[b], acc[r][b]);
    }
  }
  for (int r = 0; r < R; ++r) {
    if (softmax_len > 0) {
      SoftmaxInRegisters<NB>(acc[r], softmax_len, s + r * ls);
      continue;
    }
    for (int b = 0; b < NB; ++b) _mm512_storeu_ps(s + r * ls + kLanes * (b0 + b), acc[r][b]);
  }
}

// out_r = Σ_{j < len} s[r * ls + j] · v_j for the R output rows out + r * stride, the value rows
// v_j = v + j * stride (64 floats each).
template <int R>
__attribute__((target("avx512f"))) void ValueBlock(const float* s, int ls, const float* v, int len,
                                                   int64_t stride, float* out) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (int j = 0; j < len; ++j) {
    const float* row = v + j * stride;
    __m512 values[4];
    for (int c = 0; c < 4; ++c) values[c] = _mm512_loadu_ps(row + kLanes * c);
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(s[r * ls + j]);
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(p, values[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out + r * stride + kLanes * c, acc[r][c]);
  }
}

// One head (q, k, v, out already offset to it): blocks of up to 4 queries, all keys at once.
void AttendHead(const float* q, const float* k, const float* v, int len, int64_t stride, float* kt,
                float* s, float* out) {
  const int blocks = (len + kLanes - 1) / kLanes, ls = blocks * kLanes;
  for (int d = 0; d < kHeadDim; ++d) {
    float* row = kt + int64_t{d} * ls;
    for (int j = 0; j < len; ++j) row[j] = k[j * stride + d];
    std::fill(row + len, row + ls, 0.0f);
  }
  for (int t0 = 0; t0 < len; t0 += kQueries) {
    attention_internal::UpToFour(len - t0, [&](auto rows) {
      constexpr int R = decltype(rows)::value;
      const float* qr = q + t0 * stride;
      // Up to 64 keys: every score of a row in registers, softmax there too.
      const int softmax_len = blocks <= kKeyBlocks ? len : 0;
      for (int b0 = 0; b0 < blocks; b0 += kKeyBlocks) {
        attention_internal::UpToFour(blocks - b0, [&](auto nb) {
          ScoreBlock<R, decltype(nb)::value>(qr, stride, kt, ls, b0, s, softmax_len);
        });
      }
      if (softmax_len == 0) {
        for (int i = 0; i < R; ++i) ops::Softmax(s + i * ls, len);
      }
      ValueBlock<R>(s, ls, v, len, stride, out + t0 * stride);
    });
  }
}

#pragma GCC diagnostic pop
#endif  // GLOSSA_ATTENTION_X86

}  // namespace

void AttendSentence(const float* q, const float* k, const float* v, int len, int heads,
                    int head_dim, int64_t stride, std::vector<float>& scratch, float* out) {
  if (len <= 0) return;
#if GLOSSA_ATTENTION_X86
  if (attention_internal::HeadsOf64(head_dim)) {
    const int64_t ls = (len + kLanes - 1) / kLanes * kLanes;
    if (static_cast<int64_t>(scratch.size()) < (kHeadDim + kQueries) * ls) {
      scratch.resize((kHeadDim + kQueries) * ls);
    }
    for (int h = 0; h < heads; ++h) {
      const int64_t off = int64_t{h} * kHeadDim;
      AttendHead(q + off, k + off, v + off, len, stride, scratch.data(),
                 scratch.data() + kHeadDim * ls, out + off);
    }
    return;
  }
#endif
  if (static_cast<int64_t>(scratch.size()) < int64_t{heads} * len) scratch.resize(heads * len);
  for (int t = 0; t < len; ++t) {
    AttendRow(
        q + t * stride, heads, head_dim, len, [&](int j) { return k + j * stride; },
        [&](int j) { return v + j * stride; }, scratch.data(), out + t * stride);
  }
}

}  // namespace glossa
