#include "ops/argmax_screen.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/gemv.h"
#include "ops/ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GLOSSA_SCREEN_X86 1
#include <immintrin.h>
#else
#define GLOSSA_SCREEN_X86 0
#endif

namespace glossa {
namespace {

constexpr int64_t kCols = gemv::kSlabCols;  // 64 columns per slab
constexpr float kInf = std::numeric_limits<float>::infinity();

std::atomic<int64_t> rows_decided{0}, candidates_seen{0};

// Per-thread buffers of ArgMax: the approximate logits and one row's candidates.
struct Scratch {
  std::vector<float> approx;
  std::vector<uint8_t> codes;  // the rows' u8 codes, [rows][in rounded up to 4]
  std::vector<float> row_scale, row_max;
  std::vector<int> ids;        // one row's candidates
  std::vector<int> all_ids;    // every row's, row after row (ascending within a row)
  std::vector<int> id_start;   // [rows + 1]: where each row's ids start in all_ids
  std::vector<int> cursor;     // [rows]: each row's first id in all_ids not yet looked at
  std::vector<int64_t> pairs;  // slab * kMaxRows + row, one per (row, candidate slab)
  std::vector<float> gathered, exact;  // the rows sharing a slab, and their float32 logits
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

#if GLOSSA_SCREEN_X86
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports once inlined into a target("avx512f") function (as in ops.cc).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One slab for R rows, VNNI: acc[r][k] = u_r . q over the slab's 16 columns 16k.., where u_r are
// row r's u8 codes (4 per 32-bit lane) and q the slab's s8 codes, [in4][64][4].
template <int R>
__attribute__((target("avx512f,avx512vnni"))) inline void DotSlab(const int8_t* q, int64_t in4,
                                                                  const uint8_t* u,
                                                                  int64_t u_stride,
                                                                  __m512i acc[R][4]) {
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < 4; ++k) acc[r][k] = _mm512_setzero_si512();
  }
  for (int64_t i = 0; i < in4; ++i) {
    __m512i w[4];
    for (int k = 0; k < 4; ++k) w[k] = _mm512_loadu_si512(q + i * 4 * kCols + 64 * k);
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, u + r * u_stride + 4 * i, 4);
      const __m512i xv = _mm512_set1_epi32(four);
      for (int k = 0; k < 4; ++k) acc[r][k] = _mm512_dpbusd_epi32(acc[r][k], xv, w[k]);
    }
  }
}

// Rows [r0, r0 + R) of slab s into approx: fma(float(acc - 128 c_j), sx_r s_j, b_j), c_j the
// column's code sum (the u8 codes carry the zero point 128).
template <int R>
__attribute__((target("avx512f,avx512vnni"))) void ApproximateSlabRows(
    const int8_t* q, int64_t in4, int64_t s, int64_t r0, const uint8_t* u, int64_t u_stride,
    const float* row_scale, const int32_t* zero_sums, const float* scale, const float* bias,
    int64_t stride, float* approx) {
  __m512i acc[R][4];
  DotSlab<R>(q + s * in4 * 4 * kCols, in4, u + r0 * u_stride, u_stride, acc);
  for (int k = 0; k < 4; ++k) {
    const int64_t col = s * kCols + 16 * k;
    const __m512i zs = _mm512_loadu_si512(zero_sums + col);
    const __m512 sc = _mm512_loadu_ps(scale + col), b = _mm512_loadu_ps(bias + col);
    for (int r = 0; r < R; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][k], zs));
      const __m512 rs = _mm512_mul_ps(sc, _mm512_set1_ps(row_scale[r0 + r]));
      _mm512_storeu_ps(approx + (r0 + r) * stride + col, _mm512_fmadd_ps(dot, rs, b));
    }
  }
}

// Slabs [s0, s1) for every row, the rows in groups of up to 6 (24 accumulators) while a slab's
// codes are in cache.
void ApproximateSlabs(const int8_t* q, int64_t in4, int64_t s0, int64_t s1, int64_t rows,
                      const uint8_t* u, int64_t u_stride, const float* row_scale,
                      const int32_t* zero_sums, const float* scale, const float* bias,
                      int64_t stride, float* approx) {
  for (int64_t s = s0; s < s1; ++s) {
    for (int64_t r0 = 0; r0 < rows; r0 += 6) {
      auto run = [&](auto rows_now) {
        ApproximateSlabRows<decltype(rows_now)::value>(q, in4, s, r0, u, u_stride, row_scale,
                                                        zero_sums, scale, bias, stride, approx);
      };
      switch (std::min<int64_t>(6, rows - r0)) {
        case 1: run(std::integral_constant<int, 1>()); break;
        case 2: run(std::integral_constant<int, 2>()); break;
        case 3: run(std::integral_constant<int, 3>()); break;
        case 4: run(std::integral_constant<int, 4>()); break;
        case 5: run(std::integral_constant<int, 5>()); break;
        default: run(std::integral_constant<int, 6>()); break;
      }
    }
  }
}

// Whether a[0, n) holds no NaN and no infinity (an overflowed approximation says nothing).
__attribute__((target("avx512f"))) bool AllFinite(const float* a, int64_t n) {
  const __m512 inf = _mm512_set1_ps(kInf);
  __mmask16 bad = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(a + j)), inf, _CMP_NLT_UQ);
  }
  for (; j < n; ++j) bad |= !std::isfinite(a[j]);
  return bad == 0;
}

// E_j = norm * per_norm_j + code * per_code_j + fixed.
struct Bound {
  const float* per_norm;
  const float* per_code;
  float norm, code, fixed;
};
__attribute__((target("avx512f"))) inline __m512 BoundAt(const Bound& e, int64_t j) {
  return _mm512_fmadd_ps(
      _mm512_set1_ps(e.norm), _mm512_loadu_ps(e.per_norm + j),
      _mm512_fmadd_ps(_mm512_set1_ps(e.code), _mm512_loadu_ps(e.per_code + j),
                      _mm512_set1_ps(e.fixed)));
}

// max_j (a_j - E_j) (a_j finite or -inf: AllFinite ran first).
__attribute__((target("avx512f"))) float LowerMax(const float* a, const Bound& e, int64_t n) {
  __m512 best = _mm512_set1_ps(-kInf);
  for (int64_t j = 0; j < n; j += 16) {
    best = _mm512_max_ps(best, _mm512_sub_ps(_mm512_loadu_ps(a + j), BoundAt(e, j)));
  }
  return _mm512_reduce_max_ps(best);
}

// Appends the ids j < n with a_j + E_j >= lower to ids, ascending; false past `limit` of them.
__attribute__((target("avx512f"))) bool Above(const float* a, const Bound& bound, int64_t n,
                                              float lower, int limit, std::vector<int>* ids) {
  const __m512 vl = _mm512_set1_ps(lower);
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 e = BoundAt(bound, j);
    __mmask16 m = _mm512_cmp_ps_mask(_mm512_add_ps(_mm512_loadu_ps(a + j), e), vl, _CMP_GE_OQ);
    while (m != 0) {
      const int lane = __builtin_ctz(m);
      m &= m - 1;
      if (j + lane >= n) break;
      if (static_cast<int>(ids->size()) >= limit) return false;
      ids->push_back(static_cast<int>(j + lane));
    }
  }
  return true;
}
// One slab of the packed weights, w [in][64]: each column's scale s = max |w| / 127, its codes
// q = round(w / s) clamped to +-127 (0 for a zero column) into q in the VNNI layout [in / 4][64]
// [4] (inputs past `in` 0), their sums and sums of magnitudes, and its largest |w - s q| as
// rounded once by an fma. False for a NaN or an infinity.
__attribute__((target("avx512f"))) bool QuantizeSlab(const float* w, int64_t in, int8_t* q,
                                                     float* scale, float* residual, int32_t* sums,
                                                     int32_t* abs_sums) {
  __m512 largest[4];
  for (int k = 0; k < 4; ++k) largest[k] = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (int64_t i = 0; i < in; ++i) {
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(w + i * kCols + 16 * k);
      bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      largest[k] = _mm512_max_ps(largest[k], _mm512_abs_ps(v));
    }
  }
  const __m512 inf = _mm512_set1_ps(kInf), hi = _mm512_set1_ps(127.0f),
               lo = _mm512_set1_ps(-127.0f);
  __m512 sc[4], inv[4], res[4];
  __m512i sum[4], abs_sum[4];
  for (int k = 0; k < 4; ++k) {
    bad |= _mm512_cmp_ps_mask(largest[k], inf, _CMP_EQ_OQ);
    sc[k] = _mm512_div_ps(largest[k], hi);
    const __mmask16 nonzero = _mm512_cmp_ps_mask(sc[k], _mm512_setzero_ps(), _CMP_NEQ_OQ);
    inv[k] = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), sc[k]);
    res[k] = _mm512_setzero_ps();
    sum[k] = abs_sum[k] = _mm512_setzero_si512();
    _mm512_storeu_ps(scale + 16 * k, sc[k]);
  }
  if (bad != 0) return false;
  const __m512i byte = _mm512_set1_epi32(0xff);
  for (int64_t i4 = 0; i4 < (in + 3) / 4; ++i4) {
    for (int k = 0; k < 4; ++k) {
      __m512i packed = _mm512_setzero_si512();  // 16 columns x 4 inputs' codes
      for (int t = 0; t < 4 && 4 * i4 + t < in; ++t) {
        const __m512 v = _mm512_loadu_ps(w + (4 * i4 + t) * kCols + 16 * k);
        __m512 code = _mm512_roundscale_ps(_mm512_mul_ps(v, inv[k]),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        code = _mm512_min_ps(_mm512_max_ps(code, lo), hi);
        res[k] = _mm512_max_ps(res[k], _mm512_abs_ps(_mm512_fnmadd_ps(sc[k], code, v)));
        const __m512i c = _mm512_cvtps_epi32(code);
        sum[k] = _mm512_add_epi32(sum[k], c);
        abs_sum[k] = _mm512_add_epi32(abs_sum[k], _mm512_abs_epi32(c));
        packed = _mm512_or_si512(packed, _mm512_slli_epi32(_mm512_and_si512(c, byte), 8 * t));
      }
      _mm512_storeu_si512(q + (i4 * kCols + 16 * k) * 4, packed);
    }
  }
  for (int k = 0; k < 4; ++k) {
    _mm512_storeu_ps(residual + 16 * k, res[k]);
    _mm512_storeu_si512(sums + 16 * k, sum[k]);
    _mm512_storeu_si512(abs_sums + 16 * k, abs_sum[k]);
  }
  return true;
}

#pragma GCC diagnostic pop
#endif

#if GLOSSA_SCREEN_X86
bool CpuHasVnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}
#endif

// gamma_k of rounding-error analysis: k u / (1 - k u), u = 2^-24.
double Gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1.0 - k * u);
}

}  // namespace

ArgMaxScreen::ArgMaxScreen(const Linear& linear)
    : linear_(linear), in_(linear.in()), out_(linear.out()), slabs_((out_ + kCols - 1) / kCols) {}

bool ArgMaxScreen::Supported() {
#if GLOSSA_SCREEN_X86
  return ops::internal::CpuHasAvx512F() && CpuHasVnni();
#else
  return false;
#endif
}

std::unique_ptr<ArgMaxScreen> ArgMaxScreen::Build(const Linear& linear) {
#if GLOSSA_SCREEN_X86
  if (!Supported()) return nullptr;
  const Linear::Float32Slabs layout = linear.Float32SlabLayout();
  if (layout.slab_stride == 0) return nullptr;
  std::unique_ptr<ArgMaxScreen> screen(new ArgMaxScreen(linear));
  if (!screen->Quantize(layout.slab_stride, layout.bias)) return nullptr;
  return screen;
#else
  (void)linear;
  return nullptr;
#endif
}

// Per column: s_j, q_j and the exact largest residual d_j (double holds s_j q_ij exactly), then
// the bound's coefficients. A row x is carried as u8 codes: x_i = sx (u_i - 128) + e_i with
// sx = max|x| / 127 and |e_i| <= sx (1/2 + 2^-14) (x_i / sx rounded to nearest, computed in
// float). Then x . w_j = sx s_j I_j + s_j sum e_i q_ij + sum x_i (w_ij - s_j q_ij), I_j the
// integer dot product (exact in int32), so with L = |x|_1 as computed in float, M = max|x|:
//   |x . w_j - sx s_j I_j| <= sx (1/2 + 2^-14) Q_j + L (1 + g_n) d_j,   Q_j = s_j sum_i |q_ij|;
//   the screen's a_j = fma(float(I_j), fl(sx s_j), b_j) errs by at most 4.01 u M Q_j + u |b_j|
//   (|sx s_j I_j| <= 127 sx Q_j ~ M Q_j; I_j converts exactly below 2^24, else within u);
//   the Linear's own sum errs by at most g_{n+1} (127.5 s_j |x|_1 + |b_j|) (|w_ij| <= 127.5 s_j).
// So E_j = L per_norm_j + code per_code_j + fixed_, with
//   per_norm_j = (d_j + c 127.5 s_j) (1 + g_n), per_code_j = Q_j, code = sx (1/2 + 2^-14) +
//   4.01 u M, fixed_ = c |b|_max, c = 2 g_{n+1} + 10 u (beyond the analysis: the comparisons
//   a_j +- E_j round too), every coefficient times 1 + 2^-10 and rounded up, plus 1e-30 per
// input for values flushed to zero.
bool ArgMaxScreen::Quantize(int64_t slab_stride, const float* bias) {
#if GLOSSA_SCREEN_X86
  const int64_t padded = slabs_ * kCols, in4 = (in_ + 3) / 4;
  q_.assign(slabs_ * in4 * 4 * kCols, 0);
  scale_.assign(padded, 0.0f);
  bias_.assign(padded, 0.0f);
  per_norm_.assign(padded, 0.0f);
  per_code_.assign(padded, 0.0f);
  zero_sums_.assign(padded, 0);
  const double u = std::ldexp(1.0, -24), c = 2 * Gamma(in_ + 1) + 10 * u;
  const double margin = 1 + std::ldexp(1.0, -10), norm_error = 1 + Gamma(in_);
  double bias_max = 0;
  for (int64_t j = 0; j < out_; ++j) {
    const float b = bias != nullptr ? bias[j] : 0.0f;
    if (!std::isfinite(b)) return false;
    bias_[j] = b;
    bias_max = std::max(bias_max, std::fabs(static_cast<double>(b)));
  }
  // With the Linear's packing deferred, its slabs come from the caller's weights: copied out of a
  // model file, or, read in place, with their pages released every kReleaseSlabs slabs, so that
  // the screen's build does not leave them in this process's memory.
  constexpr int64_t kReleaseSlabs = 64;
  std::vector<float> scratch(linear_.packed() ? 0 : slab_stride);
  for (int64_t s = 0; s < slabs_; ++s) {
    if (s % kReleaseSlabs == 0 && s > 0) {
      linear_.ReleasePlainColumns((s - kReleaseSlabs) * kCols, kReleaseSlabs * kCols);
    }
    float* scale = scale_.data() + s * kCols;
    float residual[kCols];
    int32_t sums[kCols], abs_sums[kCols];
    if (!QuantizeSlab(linear_.Float32Slab(s, scratch.data()), in_,
                      q_.data() + s * in4 * 4 * kCols, scale, residual, sums, abs_sums)) {
      return false;
    }
    for (int64_t col = 0; col < kCols; ++col) {
      // The float residual is rounded once: the true one is within a factor 1 + u of it.
      const double d = residual[col] * (1 + std::ldexp(1.0, -20));
      const double e = (d + c * 127.5 * scale[col]) * norm_error * margin;
      per_norm_[s * kCols + col] = std::nextafter(static_cast<float>(e), kInf);
      const double q1 = static_cast<double>(scale[col]) * abs_sums[col] * margin;
      per_code_[s * kCols + col] = std::nextafter(static_cast<float>(q1), kInf);
      zero_sums_[s * kCols + col] = 128 * sums[col];
    }
  }
  const int64_t last = (slabs_ - 1) / kReleaseSlabs * kReleaseSlabs;
  linear_.ReleasePlainColumns(last * kCols, out_ - last * kCols);
  fixed_ = std::nextafter(static_cast<float>(c * bias_max * margin + 1e-30 * in_), kInf);
  return true;
#else
  (void)slab_stride, (void)bias;
  return false;
#endif
}

int64_t ArgMaxScreen::bytes() const {
  return static_cast<int64_t>(q_.size() + 4 * (scale_.size() + bias_.size() + per_norm_.size() +
                                               per_code_.size() + zero_sums_.size()));
}

const ArgMaxScreen* LazyArgMaxScreen::Get() const {
  std::call_once(once_, [this] {
    screen_ = ArgMaxScreen::Build(linear_);
    built_.store(true, std::memory_order_release);
  });
  return screen_.get();
}

const ArgMaxScreen* LazyArgMaxScreen::IfBuilt() const {
  return built_.load(std::memory_order_acquire) ? screen_.get() : nullptr;
}

ArgMaxScreen::Counts ArgMaxScreen::ProcessCounts() {
  return {rows_decided.load(std::memory_order_relaxed),
          candidates_seen.load(std::memory_order_relaxed)};
}

// Row r's u8 codes (zero point 128, padded with 128 to a multiple of 4 inputs), its step sx and
// max|x|; false for a non-finite input or a step that would be subnormal.
bool ArgMaxScreen::QuantizeRow(const float* x, uint8_t* codes, float* sx, float* max_abs) const {
  float m = 0.0f;
  for (int64_t i = 0; i < in_; ++i) m = std::max(m, std::fabs(x[i]));
  if (!std::isfinite(m)) return false;
  const float step = m / 127.0f;
  if (m != 0.0f && !(step >= std::numeric_limits<float>::min())) return false;
  const float inv = m != 0.0f ? 1.0f / step : 0.0f;
  const int64_t padded = (in_ + 3) / 4 * 4;
  for (int64_t i = 0; i < in_; ++i) {
    const float r = std::min(127.0f, std::max(-127.0f, std::nearbyint(x[i] * inv)));
    codes[i] = static_cast<uint8_t>(static_cast<int>(r) + 128);
  }
  std::fill(codes + in_, codes + padded, uint8_t{128});
  *sx = step;
  *max_abs = m;
  return true;
}

void ArgMaxScreen::Approximate(const uint8_t* codes, const float* row_scale, int64_t rows,
                               float* approx) const {
#if GLOSSA_SCREEN_X86
  const int64_t stride = slabs_ * kCols, in4 = (in_ + 3) / 4;
  const int threads = omp_get_max_threads();
  auto slabs = [&](int64_t s0, int64_t s1) {
    ApproximateSlabs(q_.data(), in4, s0, s1, rows, codes, in4 * 4, row_scale, zero_sums_.data(),
                     scale_.data(), bias_.data(), stride, approx);
  };
  if (threads <= 1) return slabs(0, slabs_);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    slabs(slabs_ * t / n, slabs_ * (t + 1) / n);
  }
#else
  (void)codes, (void)row_scale, (void)rows, (void)approx;
#endif
}

bool ArgMaxScreen::Candidates(const float* x, float sx, float max_abs, const float* approx,
                              std::vector<int>* ids) const {
#if GLOSSA_SCREEN_X86
  float norm = 0.0f;
  for (int64_t i = 0; i < in_; ++i) norm += std::fabs(x[i]);
  if (!std::isfinite(norm)) return false;
  const double u = std::ldexp(1.0, -24), margin = 1 + std::ldexp(1.0, -10);
  const double code = (sx * (0.5 + std::ldexp(1.0, -14)) + 4.01 * u * max_abs) * margin;
  const Bound bound{per_norm_.data(), per_code_.data(), norm,
                    std::nextafter(static_cast<float>(code), kInf), fixed_};
  const int64_t padded = slabs_ * kCols;
  const float lower = LowerMax(approx, bound, padded);
  if (!std::isfinite(lower)) return false;  // every id excluded
  ids->clear();
  return Above(approx, bound, out_, lower, kMaxCandidates, ids) && !ids->empty();
#else
  (void)x, (void)sx, (void)max_abs, (void)approx, (void)ids;
  return false;
#endif
}

bool ArgMaxScreen::ArgMax(const float* x, int64_t rows, const int* excluded, const int* offsets,
                          int64_t* index, float* value) const {
#if GLOSSA_SCREEN_X86
  if (rows < 1 || rows > kMaxRows || declined_.load(std::memory_order_relaxed)) return false;
  Scratch& s = ThreadScratch();
  const int64_t stride = slabs_ * kCols, in4 = (in_ + 3) / 4;
  if (static_cast<int64_t>(s.approx.size()) < rows * stride) s.approx.resize(rows * stride);
  if (static_cast<int64_t>(s.codes.size()) < rows * in4 * 4) s.codes.resize(rows * in4 * 4);
  s.row_scale.resize(rows);
  s.row_max.resize(rows);
  s.all_ids.clear();
  s.id_start.clear();
  s.pairs.clear();
  for (int64_t r = 0; r < rows; ++r) {
    if (!QuantizeRow(x + r * in_, s.codes.data() + r * in4 * 4, &s.row_scale[r], &s.row_max[r]))
      return false;
  }
  Approximate(s.codes.data(), s.row_scale.data(), rows, s.approx.data());
  for (int64_t r = 0; r < rows; ++r) {
    float* approx = s.approx.data() + r * stride;
    if (!AllFinite(approx, out_)) return false;
    std::fill(approx + out_, approx + stride, -kInf);
    for (int e = offsets[r]; e < offsets[r + 1]; ++e) {
      if (excluded[e] >= 0 && excluded[e] < out_) approx[excluded[e]] = -kInf;
    }
    const float* xr = x + r * in_;
    if (!Candidates(xr, s.row_scale[r], s.row_max[r], approx, &s.ids)) return false;
    s.id_start.push_back(static_cast<int>(s.all_ids.size()));
    for (size_t k = 0; k < s.ids.size(); ++k) {
      if (k == 0 || s.ids[k] / kCols != s.ids[k - 1] / kCols) {
        s.pairs.push_back(s.ids[k] / kCols * kMaxRows + r);
      }
    }
    s.all_ids.insert(s.all_ids.end(), s.ids.begin(), s.ids.end());
    index[r] = -1;
  }
  candidates_seen.fetch_add(static_cast<int64_t>(s.all_ids.size()), std::memory_order_relaxed);
  s.id_start.push_back(static_cast<int>(s.all_ids.size()));
  s.cursor.assign(s.id_start.begin(), s.id_start.end() - 1);
  // Each candidate slab once, for every row that has candidates in it: rows that share a slab
  // share its read (and a deferred Linear's copy of it). Slabs in ascending order, so each row
  // meets its ids in ascending order and the first largest wins.
  std::sort(s.pairs.begin(), s.pairs.end());
  for (size_t p = 0; p < s.pairs.size();) {
    const int64_t slab = s.pairs[p] / kMaxRows, first = slab * kCols;
    size_t end = p;
    while (end < s.pairs.size() && s.pairs[end] / kMaxRows == slab) ++end;
    const int64_t group = static_cast<int64_t>(end - p), cols = std::min(kCols, out_ - first);
    const float* xs = x + (s.pairs[p] % kMaxRows) * in_;
    if (group > 1) {
      s.gathered.resize(group * in_);
      for (int64_t g = 0; g < group; ++g) {
        std::copy_n(x + (s.pairs[p + g] % kMaxRows) * in_, in_, s.gathered.data() + g * in_);
      }
      xs = s.gathered.data();
    }
    s.exact.resize(group * cols);
    if (!linear_.ForwardColumns(xs, group, first, cols, s.exact.data())) {
      declined_.store(true, std::memory_order_relaxed);
      return false;
    }
    for (int64_t g = 0; g < group; ++g) {
      const int64_t r = s.pairs[p + g] % kMaxRows;
      int& k = s.cursor[r];
      for (; k < s.id_start[r + 1] && s.all_ids[k] < first + cols; ++k) {
        const float v = s.exact[g * cols + s.all_ids[k] - first];
        if (!std::isfinite(v)) return false;
        if (index[r] < 0 || v > value[r]) {
          index[r] = s.all_ids[k];
          value[r] = v;
        }
      }
    }
    p = end;
  }
  rows_decided.fetch_add(rows, std::memory_order_relaxed);
  return true;
#else
  (void)x, (void)rows, (void)excluded, (void)offsets, (void)index, (void)value;
  return false;
#endif
}

}  // namespace glossa
