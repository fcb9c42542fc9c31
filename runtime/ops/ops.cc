#include "ops/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/row_cache.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define GLOSSA_OPS_X86 1
#include <immintrin.h>

#include "ops/avx512_math.h"
#else
#define GLOSSA_OPS_X86 0
#endif

namespace glossa::ops {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool CpuHasAvx512() {
#if GLOSSA_OPS_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

std::atomic<bool>& Avx512Flag() {
  static std::atomic<bool> flag{CpuHasAvx512()};
  return flag;
}

bool UseAvx512() { return Avx512Flag().load(std::memory_order_relaxed); }

// Inserts (score, id) into best[0..kept), sorted by score descending with equal scores in
// insertion order; when the list is full (kept == k) the last entry is dropped. The caller
// checks that the entry belongs there (kept < k or score > best[k - 1].score).
inline void Insert(ScoredId* best, int& kept, int k, float score, int32_t id) {
  int pos = kept < k ? kept++ : k - 1;
  while (pos > 0 && best[pos - 1].score < score) {
    best[pos] = best[pos - 1];
    --pos;
  }
  best[pos] = {score, id};
}

// ---- Portable kernels (scalar, libm's exp) -------------------------------------------------

float MaxPortable(const float* x, int64_t n) {
  float max = -kInf;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  return max;
}

// Summed in double: a float running sum over a vocabulary of 15k loses ~1e-5 relative.
float SumExpPortable(const float* x, int64_t n, float max) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
  return static_cast<float>(sum);
}

BlockStats BlockStatsPortable(const float* x, int64_t n, bool argmax) {
  BlockStats b;
  b.max = MaxPortable(x, n);
  b.sum_exp = SumExpPortable(x, n, b.max);
  b.starts_nan = std::isnan(x[0]);
  if (argmax && !b.starts_nan) {
    while (x[b.argmax] != b.max) ++b.argmax;  // x[0] <= max, so some x equals it
  }
  return b;
}

int TopKLogProbsPortable(const float* x, int64_t n, LogSumExp lse, float offset, int k,
                         ScoredId* best) {
  int kept = 0;
  if (k <= 0) return 0;
  for (int64_t i = 0; i < n; ++i) {
    const float s = ((x[i] - lse.max) - lse.log_sum) + offset;
    if (kept < k || s > best[k - 1].score) Insert(best, kept, k, s, static_cast<int32_t>(i));
  }
  return kept;
}

int UpdateTopKPortable(const float* x, int64_t n, int32_t first_index, int k, ScoredId* best,
                       int kept) {
  for (int64_t i = 0; i < n; ++i) {
    if ((kept < k && !std::isnan(x[i])) || (kept == k && x[i] > best[k - 1].score)) {
      Insert(best, kept, k, x[i], first_index + static_cast<int32_t>(i));
    }
  }
  return kept;
}

// ---- Layer norm: both kernels sum in the same order, so their results are identical ---------
// Sums over a row in 64 lanes (element i into lane i % 64, in order), then the lanes pairwise:
// lane j + lane j+32, then j+16, j+8, j+4, j+2, j+1. With 64 independent chains the AVX-512
// kernel keeps 4 vectors in flight; a float running sum over the row was one chain of `dim`
// dependent additions (8 cycles per element on d_model 256).
constexpr int kNormLanes = 64;

float ReduceLanesPortable(float* lanes) {
  for (int width = kNormLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] = lanes[j] + lanes[j + width];
  }
  return lanes[0];
}

void LayerNormRowPortable(float* row, int64_t dim, const float* gamma, const float* beta,
                          float eps) {
  float lanes[kNormLanes] = {};
  for (int64_t i = 0; i < dim; ++i) lanes[i % kNormLanes] += row[i];
  const float mean = ReduceLanesPortable(lanes) / static_cast<float>(dim);
  std::fill(lanes, lanes + kNormLanes, 0.0f);
  for (int64_t i = 0; i < dim; ++i) {
    const float d = row[i] - mean;
    lanes[i % kNormLanes] += d * d;
  }
  const float inv = 1.0f / std::sqrt(ReduceLanesPortable(lanes) / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) row[i] = (row[i] - mean) * inv * gamma[i] + beta[i];
}

#if GLOSSA_OPS_X86
// ---- AVX-512 kernels -----------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wuninitialized and
// -Wmaybe-uninitialized report once inlined into a target("avx512f") function.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define GLOSSA_AVX512 __attribute__((target("avx512f")))

using avx512::Exp16;
using avx512::LaneMask;

// The lanes j + j+32, j+16, ..., j+1 of a0..a3 (lanes 0-15, 16-31, 32-47, 48-63), as
// ReduceLanesPortable.
GLOSSA_AVX512 float ReduceLanesAvx512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 h = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(h), 1));
  const __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(h), hi);
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  v4 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));                       // j + j+2
  return _mm_cvtss_f32(_mm_add_ss(v4, _mm_shuffle_ps(v4, v4, 1)));  // j + j+1
}

// a * b that GCC never fuses with a following addition (it contracts _mm512_mul_ps + add into
// a multiply-add, which the portable kernel, built for x86-64 without FMA, does not do).
GLOSSA_AVX512 inline __m512 Mul(__m512 a, __m512 b) {
  return _mm512_mul_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}

GLOSSA_AVX512 void LayerNormRowAvx512(float* row, int64_t dim, const float* gamma,
                                      const float* beta, float eps) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  for (int64_t i = 0; i < dim; i += 16) {
    const __mmask16 mask = LaneMask(dim - i);
    __m512& acc = a[(i / 16) % 4];
    acc = _mm512_mask_add_ps(acc, mask, acc, _mm512_maskz_loadu_ps(mask, row + i));
  }
  const float mean = ReduceLanesAvx512(a[0], a[1], a[2], a[3]) / static_cast<float>(dim);
  const __m512 vmean = _mm512_set1_ps(mean);
  for (__m512& acc : a) acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < dim; i += 16) {
    const __mmask16 mask = LaneMask(dim - i);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + i), vmean);
    __m512& acc = a[(i / 16) % 4];
    acc = _mm512_mask_add_ps(acc, mask, acc, Mul(d, d));
  }
  const float var = ReduceLanesAvx512(a[0], a[1], a[2], a[3]) / static_cast<float>(dim);
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
  for (int64_t i = 0; i < dim; i += 16) {
    const __mmask16 mask = LaneMask(dim - i);
    const __m512 n = Mul(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + i), vmean), inv);
    const __m512 g = Mul(n, _mm512_maskz_loadu_ps(mask, gamma + i));
    const __m512 y = _mm512_add_ps(g, _mm512_maskz_loadu_ps(mask, beta + i));
    _mm512_mask_storeu_ps(row + i, mask, y);
  }
}

GLOSSA_AVX512 void ExpAvx512(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 mask = LaneMask(n - i);
    _mm512_mask_storeu_ps(y + i, mask, Exp16(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

GLOSSA_AVX512 void SwishAvx512(float* x, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(x + i, mask, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}

GLOSSA_AVX512 float MaxAvx512(const float* x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(-kInf), m1 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16) m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(m0, LaneMask(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

// Σ e^(x[i] - max), in two vector accumulators.
GLOSSA_AVX512 float SumExpAvx512(const float* x, int64_t n, float max) {
  const __m512 vmax = _mm512_set1_ps(max);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_add_ps(s0, Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax)));
    s1 = _mm512_add_ps(s1, Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vmax)));
  }
  if (i + 16 <= n) {
    s0 = _mm512_add_ps(s0, Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax)));
    i += 16;
  }
  if (i < n) {
    const __mmask16 mask = LaneMask(n - i);
    s1 = _mm512_mask_add_ps(s1, mask, s1,
                            Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vmax)));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// The largest value and the index of its first occurrence, in two interleaved (value, index)
// accumulators: each lane keeps the first index of its running maximum (strictly greater
// replaces), and the final reduction takes the lowest index among the lanes holding the overall
// maximum. NaNs are never chosen (as in ArgMax's strict comparison); index 0 when nothing
// compares (a row of NaNs).
struct MaxAt {
  int64_t index;
  float max;
};
GLOSSA_AVX512 MaxAt ArgMaxAvx512(const float* x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(-kInf), m1 = m0;
  __m512i i0 = _mm512_setzero_si512(), i1 = i0;
  __m512i c0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(16));
  const __m512i step = _mm512_set1_epi32(32);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    const __mmask16 g0 = _mm512_cmp_ps_mask(v0, m0, _CMP_GT_OQ);
    const __mmask16 g1 = _mm512_cmp_ps_mask(v1, m1, _CMP_GT_OQ);
    m0 = _mm512_mask_mov_ps(m0, g0, v0);
    m1 = _mm512_mask_mov_ps(m1, g1, v1);
    i0 = _mm512_mask_mov_epi32(i0, g0, c0);
    i1 = _mm512_mask_mov_epi32(i1, g1, c1);
    c0 = _mm512_add_epi32(c0, step);
    c1 = _mm512_add_epi32(c1, step);
  }
  for (; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    const __mmask16 g = _mm512_mask_cmp_ps_mask(mask, v, m0, _CMP_GT_OQ);
    m0 = _mm512_mask_mov_ps(m0, g, v);
    i0 = _mm512_mask_mov_epi32(i0, g, c0);
    c0 = _mm512_add_epi32(c0, _mm512_set1_epi32(16));
  }
  const float max = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  const __m512 vmax = _mm512_set1_ps(max);
  const __m512i none = _mm512_set1_epi32(std::numeric_limits<int32_t>::max());
  const __m512i k0 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(m0, vmax, _CMP_EQ_OQ), i0);
  const __m512i k1 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(m1, vmax, _CMP_EQ_OQ), i1);
  int32_t index = _mm512_reduce_min_epi32(_mm512_min_epi32(k0, k1));
  if (index == std::numeric_limits<int32_t>::max()) index = 0;  // no lane equals max: NaN max
  // ArgMax's scalar loop keeps index 0 when x[0] is NaN (nothing compares greater).
  if (std::isnan(x[0])) index = 0;
  return {index, max};
}

// Without argmax, the block's max comes from MaxAvx512 (the same value for rows without NaN).
GLOSSA_AVX512 BlockStats BlockStatsAvx512(const float* x, int64_t n, bool argmax) {
  BlockStats b;
  if (argmax) {
    const MaxAt best = ArgMaxAvx512(x, n);
    b.max = best.max;
    b.argmax = static_cast<int32_t>(best.index);
  } else {
    b.max = MaxAvx512(x, n);
  }
  b.sum_exp = SumExpAvx512(x, n, b.max);
  b.starts_nan = std::isnan(x[0]);
  return b;
}

GLOSSA_AVX512 bool HasNaNAvx512(const float* x, int64_t n) {
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(LaneMask(n - i), x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  return nan != 0;
}

// Scores s = ((x - max) - log_sum) + offset, 16 at a time; only lanes above the current k-th
// best go through the scalar insertion, which rechecks them against the rising threshold.
GLOSSA_AVX512 int TopKLogProbsAvx512(const float* x, int64_t n, LogSumExp lse, float offset,
                                     int k, ScoredId* best) {
  if (k <= 0) return 0;
  int kept = 0;
  int64_t i = 0;
  for (; i < n && kept < k; ++i) {
    Insert(best, kept, k, ((x[i] - lse.max) - lse.log_sum) + offset, static_cast<int32_t>(i));
  }
  if (kept < k) return kept;
  const __m512 vmax = _mm512_set1_ps(lse.max), vlog = _mm512_set1_ps(lse.log_sum),
               voff = _mm512_set1_ps(offset);
  alignas(64) float lanes[16];
  for (; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 s = _mm512_add_ps(
        _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vmax), vlog), voff);
    unsigned above = _mm512_mask_cmp_ps_mask(mask, s, _mm512_set1_ps(best[k - 1].score),
                                             _CMP_GT_OQ);
    if (above == 0) continue;
    _mm512_store_ps(lanes, s);
    for (; above != 0; above &= above - 1) {
      const int j = __builtin_ctz(above);
      if (lanes[j] > best[k - 1].score) {
        Insert(best, kept, k, lanes[j], static_cast<int32_t>(i + j));
      }
    }
  }
  return kept;
}

// As TopKLogProbsAvx512 on the raw values: once the list is full, only lanes above its last
// entry go through the scalar insertion.
GLOSSA_AVX512 int UpdateTopKAvx512(const float* x, int64_t n, int32_t first_index, int k,
                                   ScoredId* best, int kept) {
  int64_t i = 0;
  for (; i < n && kept < k; ++i) {
    if (!std::isnan(x[i])) Insert(best, kept, k, x[i], first_index + static_cast<int32_t>(i));
  }
  for (; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    unsigned above =
        _mm512_mask_cmp_ps_mask(mask, v, _mm512_set1_ps(best[k - 1].score), _CMP_GT_OQ);
    for (; above != 0; above &= above - 1) {
      const int j = __builtin_ctz(above);
      if (x[i + j] > best[k - 1].score) {
        Insert(best, kept, k, x[i + j], first_index + static_cast<int32_t>(i + j));
      }
    }
  }
  return kept;
}

GLOSSA_AVX512 void SoftmaxAvx512(float* x, int64_t n) {
  const float max = MaxAvx512(x, n);
  const __m512 vmax = _mm512_set1_ps(max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vmax));
    sum = _mm512_mask_add_ps(sum, mask, sum, e);
    _mm512_mask_storeu_ps(x + i, mask, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    _mm512_mask_storeu_ps(x + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), inv));
  }
}

GLOSSA_AVX512 void LogSoftmaxAvx512(float* x, int64_t n, LogSumExp lse) {
  const __m512 vmax = _mm512_set1_ps(lse.max), vlog = _mm512_set1_ps(lse.log_sum);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = LaneMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    _mm512_mask_storeu_ps(x + i, mask, _mm512_sub_ps(_mm512_sub_ps(v, vmax), vlog));
  }
}

#undef GLOSSA_AVX512
#pragma GCC diagnostic pop
#endif  // GLOSSA_OPS_X86

BlockStats BlockStatsOf(const float* x, int64_t n, bool argmax) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) return BlockStatsAvx512(x, n, argmax);
#endif
  return BlockStatsPortable(x, n, argmax);
}

// ComputeBlockArgMax's sum_exp: a NaN in x, or an infinite max, makes SumExp's NaN (NaN - max,
// or inf - inf); otherwise each exponential is at most 1 and the max's is 1, so it is finite.
BlockStats BlockArgMaxOf(const float* x, int64_t n) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
#if GLOSSA_OPS_X86
  if (UseAvx512()) {
    const MaxAt best = ArgMaxAvx512(x, n);
    BlockStats b;
    b.max = best.max;
    b.argmax = static_cast<int32_t>(best.index);
    b.starts_nan = std::isnan(x[0]);
    b.sum_exp = !std::isfinite(b.max) || HasNaNAvx512(x, n) ? kNaN : 1.0f;
    return b;
  }
#endif
  BlockStats b = BlockStatsPortable(x, n, /*argmax=*/true);
  if (!std::isnan(b.sum_exp)) b.sum_exp = 1.0f;
  return b;
}

ArgMaxLogSumExp BlockwiseLogSumExp(const float* x, int64_t n, bool argmax) {
  SoftmaxAccumulator acc;
  for (int64_t i = 0; i < n; i += kSoftmaxBlock) {
    acc.Add(BlockStatsOf(x + i, std::min(kSoftmaxBlock, n - i), argmax));
  }
  return acc.Result();
}

}  // namespace

namespace internal {
bool Avx512Enabled() { return UseAvx512(); }
bool CpuHasAvx512F() {
  static const bool has = CpuHasAvx512();
  return has;
}
void SetAvx512Enabled(bool enabled) {
  Avx512Flag().store(enabled && CpuHasAvx512(), std::memory_order_relaxed);
}
}  // namespace internal

void LayerNorm(float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta,
               float eps) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) {
    for (int64_t r = 0; r < rows; ++r) LayerNormRowAvx512(x + r * dim, dim, gamma, beta, eps);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) LayerNormRowPortable(x + r * dim, dim, gamma, beta, eps);
}

void Exp(const float* x, int64_t n, float* y) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) return ExpAvx512(x, n, y);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void Swish(float* x, int64_t n) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) return SwishAvx512(x, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void Softmax(float* x, int64_t n) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) return SoftmaxAvx512(x, n);
#endif
  const float max = MaxPortable(x, n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

LogSumExp ComputeLogSumExp(const float* x, int64_t n) {
  return BlockwiseLogSumExp(x, n, /*argmax=*/false).lse;
}

void LogSoftmax(float* x, int64_t n) {
  const LogSumExp lse = ComputeLogSumExp(x, n);
#if GLOSSA_OPS_X86
  if (UseAvx512()) return LogSoftmaxAvx512(x, n, lse);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - lse.max) - lse.log_sum;
}

ArgMaxLogSumExp ComputeArgMaxLogSumExp(const float* x, int64_t n) {
  return BlockwiseLogSumExp(x, n, /*argmax=*/true);
}

BlockStats ComputeBlockStats(const float* x, int64_t n) {
  return BlockStatsOf(x, n, /*argmax=*/true);
}

BlockStats ComputeBlockArgMax(const float* x, int64_t n) { return BlockArgMaxOf(x, n); }

void SoftmaxAccumulator::Add(const BlockStats& b) {
  constexpr float kNegInf = -kInf;
  if (blocks_ == 0) {
    max_ = b.max;
    sum_ = b.sum_exp;
    index_ = b.starts_nan ? 0 : b.argmax;
    starts_nan_ = b.starts_nan;
  } else if (b.max > max_) {
    // Blocks so far of -inf only have a NaN sum (e^(-inf - -inf)) and weigh nothing.
    sum_ = max_ == kNegInf ? b.sum_exp
                           : sum_ * std::exp(static_cast<double>(max_) - b.max) + b.sum_exp;
    max_ = b.max;
    if (!starts_nan_) index_ = blocks_ * kSoftmaxBlock + b.argmax;
  } else if (b.max != kNegInf) {
    sum_ += b.sum_exp * std::exp(static_cast<double>(b.max) - max_);
  }
  ++blocks_;
}

ArgMaxLogSumExp SoftmaxAccumulator::Result() const {
  ArgMaxLogSumExp r;
  r.index = index_;
  r.lse = {max_, std::log(static_cast<float>(sum_))};
  return r;
}

int TopKLogProbs(const float* x, int64_t n, LogSumExp lse, float offset, int k, ScoredId* best) {
#if GLOSSA_OPS_X86
  if (UseAvx512()) return TopKLogProbsAvx512(x, n, lse, offset, k, best);
#endif
  return TopKLogProbsPortable(x, n, lse, offset, k, best);
}

int UpdateTopK(const float* x, int64_t n, int32_t first_index, int k, ScoredId* best, int kept) {
  if (k <= 0) return 0;
#if GLOSSA_OPS_X86
  if (UseAvx512()) return UpdateTopKAvx512(x, n, first_index, k, best, kept);
#endif
  return UpdateTopKPortable(x, n, first_index, k, best, kept);
}

namespace {

void AddPosition(const float* e, const float* p, int64_t dim, float scale, float* o) {
  for (int64_t i = 0; i < dim; ++i) o[i] = e[i] * scale + p[i];
}

}  // namespace

void EmbedTokens(const StoredTable& table, const float* positions, const int* ids,
                 const int* pos, int64_t rows, int64_t dim, float scale, float* out) {
  auto position = [&](int64_t r) { return positions + static_cast<int64_t>(pos[r]) * dim; };
  if (!table.copy) {
    for (int64_t r = 0; r < rows; ++r) {
      AddPosition(table.rows + static_cast<int64_t>(ids[r]) * dim, position(r), dim, scale,
                  out + r * dim);
    }
    return;
  }
  // Rows the cache keeps come from there; the others are copied out below.
  thread_local std::vector<int64_t> order;
  order.clear();
  for (int64_t r = 0; r < rows; ++r) {
    const float* kept = table.cache != nullptr ? table.cache->Find(ids[r]) : nullptr;
    if (kept != nullptr) {
      AddPosition(kept, position(r), dim, scale, out + r * dim);
    } else {
      order.push_back(r);
    }
  }
  // Each distinct id's row is copied out once (a system call each, for ModelFile::CopyOut), into
  // the first row that has it; the others with that id copy it from there.
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return ids[a] < ids[b] || (ids[a] == ids[b] && a < b); });
  const uint64_t bytes = static_cast<uint64_t>(dim) * sizeof(float);
  const int64_t missing = static_cast<int64_t>(order.size());
  for (int64_t i = 0; i < missing;) {
    const int64_t first = order[i];
    float* raw = out + first * dim;
    table.copy(table.rows + static_cast<int64_t>(ids[first]) * dim, bytes, raw);
    int64_t end = i + 1;
    for (; end < missing && ids[order[end]] == ids[first]; ++end) {
      const int64_t r = order[end];
      AddPosition(raw, position(r), dim, scale, out + r * dim);
    }
    AddPosition(raw, position(first), dim, scale, raw);  // in place, once the others are done
    i = end;
  }
}

int64_t ArgMax(const float* x, int64_t n) {
#if GLOSSA_OPS_X86
  if (UseAvx512() && n >= 1) return ArgMaxAvx512(x, n).index;
#endif
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace glossa::ops
