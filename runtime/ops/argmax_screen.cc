#include "ops/argmax_screen.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
  std::vector<int> ids;
  float exact[kCols];
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

// Slabs [s0, s1) for R rows: approx[r][j] = fma(x_r · q_j, s_j, b_j), each dot product FMA
// chains over the inputs (U of them, interleaved, then added).
template <int R>
__attribute__((target("avx512f"))) void ApproximateSlabs(const int8_t* q, int64_t in, int64_t s0,
                                                         int64_t s1, const float* x,
                                                         const float* scale, const float* bias,
                                                         int64_t stride, float* approx) {
  // U sets of accumulators (inputs i, i + 1, ... in turn), so that few rows still keep enough
  // FMA chains in flight; added together at the end (the bound holds for any order).
  constexpr int U = R <= 2 ? 2 : 1;
  for (int64_t s = s0; s < s1; ++s) {
    __m512 acc[U][R][4];
    for (int u = 0; u < U; ++u) {
      for (int r = 0; r < R; ++r) {
        for (int k = 0; k < 4; ++k) acc[u][r][k] = _mm512_setzero_ps();
      }
    }
    const int8_t* w = q + s * in * kCols;
    // Input i into accumulator set u.
    auto step = [&](int64_t i, int u) __attribute__((always_inline, target("avx512f"))) {
      __m512 wf[4];
      for (int k = 0; k < 4; ++k) {
        const __m128i bytes =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i * kCols + 16 * k));
        wf[k] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
      }
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_set1_ps(x[r * in + i]);
        for (int k = 0; k < 4; ++k) acc[u][r][k] = _mm512_fmadd_ps(wf[k], xv, acc[u][r][k]);
      }
    };
    int64_t i = 0;
    for (; i + U <= in; i += U) {
      for (int u = 0; u < U; ++u) step(i + u, u);
    }
    for (; i < in; ++i) step(i, 0);
    for (int u = 1; u < U; ++u) {
      for (int r = 0; r < R; ++r) {
        for (int k = 0; k < 4; ++k) acc[0][r][k] = _mm512_add_ps(acc[0][r][k], acc[u][r][k]);
      }
    }
    for (int k = 0; k < 4; ++k) {
      const int64_t col = s * kCols + 16 * k;
      const __m512 sc = _mm512_loadu_ps(scale + col), b = _mm512_loadu_ps(bias + col);
      for (int r = 0; r < R; ++r) {
        _mm512_storeu_ps(approx + r * stride + col, _mm512_fmadd_ps(acc[0][r][k], sc, b));
      }
    }
  }
}

template <int R>
void ApproximateRows(const int8_t* q, int64_t in, int64_t slabs, const float* x, const float* scale,
                     const float* bias, int64_t stride, float* approx) {
  const int threads = omp_get_max_threads();
  if (threads <= 1) return ApproximateSlabs<R>(q, in, 0, slabs, x, scale, bias, stride, approx);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    ApproximateSlabs<R>(q, in, slabs * t / n, slabs * (t + 1) / n, x, scale, bias, stride, approx);
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

// max_j (a_j - E_j), E_j = norm * per_norm_j + fixed (a_j finite or -inf: AllFinite ran first).
__attribute__((target("avx512f"))) float LowerMax(const float* a, const float* per_norm, int64_t n,
                                                  float norm, float fixed) {
  const __m512 vn = _mm512_set1_ps(norm), vf = _mm512_set1_ps(fixed);
  __m512 best = _mm512_set1_ps(-kInf);
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 e = _mm512_fmadd_ps(vn, _mm512_loadu_ps(per_norm + j), vf);
    best = _mm512_max_ps(best, _mm512_sub_ps(_mm512_loadu_ps(a + j), e));
  }
  return _mm512_reduce_max_ps(best);
}

// Appends the ids j < n with a_j + E_j >= lower to ids, ascending; false past `limit` of them.
__attribute__((target("avx512f"))) bool Above(const float* a, const float* per_norm, int64_t n,
                                              float norm, float fixed, float lower, int limit,
                                              std::vector<int>* ids) {
  const __m512 vn = _mm512_set1_ps(norm), vf = _mm512_set1_ps(fixed), vl = _mm512_set1_ps(lower);
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 e = _mm512_fmadd_ps(vn, _mm512_loadu_ps(per_norm + j), vf);
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
// q = round(w / s) clamped to +-127 (0 for a zero column), and its largest |w - s q| as rounded
// once by an fma. False for a NaN or an infinity.
__attribute__((target("avx512f"))) bool QuantizeSlab(const float* w, int64_t in, int8_t* q,
                                                     float* scale, float* residual) {
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
  for (int k = 0; k < 4; ++k) {
    bad |= _mm512_cmp_ps_mask(largest[k], inf, _CMP_EQ_OQ);
    sc[k] = _mm512_div_ps(largest[k], hi);
    const __mmask16 nonzero = _mm512_cmp_ps_mask(sc[k], _mm512_setzero_ps(), _CMP_NEQ_OQ);
    inv[k] = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), sc[k]);
    res[k] = _mm512_setzero_ps();
    _mm512_storeu_ps(scale + 16 * k, sc[k]);
  }
  if (bad != 0) return false;
  for (int64_t i = 0; i < in; ++i) {
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(w + i * kCols + 16 * k);
      __m512 code = _mm512_roundscale_ps(_mm512_mul_ps(v, inv[k]),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      code = _mm512_min_ps(_mm512_max_ps(code, lo), hi);
      res[k] = _mm512_max_ps(res[k], _mm512_abs_ps(_mm512_fnmadd_ps(sc[k], code, v)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i * kCols + 16 * k),
                       _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(code)));
    }
  }
  for (int k = 0; k < 4; ++k) _mm512_storeu_ps(residual + 16 * k, res[k]);
  return true;
}

#pragma GCC diagnostic pop
#endif

// gamma_k of rounding-error analysis: k u / (1 - k u), u = 2^-24.
double Gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1.0 - k * u);
}

}  // namespace

ArgMaxScreen::ArgMaxScreen(const Linear& linear)
    : linear_(linear), in_(linear.in()), out_(linear.out()), slabs_((out_ + kCols - 1) / kCols) {}

std::unique_ptr<ArgMaxScreen> ArgMaxScreen::Build(const Linear& linear) {
#if GLOSSA_SCREEN_X86
  if (!ops::internal::CpuHasAvx512F()) return nullptr;
  const Linear::PackedFloat32 view = linear.PackedFloat32View();
  if (view.data == nullptr) return nullptr;
  std::unique_ptr<ArgMaxScreen> screen(new ArgMaxScreen(linear));
  if (!screen->Quantize(view.data, view.slab_stride, view.bias)) return nullptr;
  return screen;
#else
  (void)linear;
  return nullptr;
#endif
}

// Per column: s_j, q_j and the exact largest residual d_j (double holds s_j q_ij exactly), then
// E_j's coefficients. The bound on |k_j - a_j|, with L = |x|_1 as computed in float:
//   |x|_1 <= L (1 + g_n); |w_ij| <= 127.5 s_j; the Linear's sum and the screen's each err by at
//   most g_{n+1} (127.5 s_j |x|_1 + |b_j|) plus one rounding of the screen's fma;
// so E_j = L (d_j + c 127.5 s_j) (1 + g_n) + c |b|_max, c = 2 g_{n+1} + 10 u (8 u beyond the
// analysis: the comparisons a_j +- E_j round too), all times 1 + 2^-10, plus 1e-30 for values
// flushed to zero.
bool ArgMaxScreen::Quantize(const float* packed, int64_t slab_stride, const float* bias) {
#if GLOSSA_SCREEN_X86
  const int64_t padded = slabs_ * kCols;
  q_.assign(slabs_ * in_ * kCols, 0);
  scale_.assign(padded, 0.0f);
  bias_.assign(padded, 0.0f);
  per_norm_.assign(padded, 0.0f);
  const double u = std::ldexp(1.0, -24), c = 2 * Gamma(in_ + 1) + 10 * u;
  const double margin = 1 + std::ldexp(1.0, -10), norm_error = 1 + Gamma(in_);
  double bias_max = 0;
  for (int64_t j = 0; j < out_; ++j) {
    const float b = bias != nullptr ? bias[j] : 0.0f;
    if (!std::isfinite(b)) return false;
    bias_[j] = b;
    bias_max = std::max(bias_max, std::fabs(static_cast<double>(b)));
  }
  for (int64_t s = 0; s < slabs_; ++s) {
    float* scale = scale_.data() + s * kCols;
    float residual[kCols];
    if (!QuantizeSlab(packed + s * slab_stride, in_, q_.data() + s * in_ * kCols, scale,
                      residual)) {
      return false;
    }
    for (int64_t col = 0; col < kCols; ++col) {
      // The float residual is rounded once: the true one is within a factor 1 + u of it.
      const double d = residual[col] * (1 + std::ldexp(1.0, -20));
      const double e = (d + c * 127.5 * scale[col]) * norm_error * margin;
      per_norm_[s * kCols + col] = std::nextafter(static_cast<float>(e), kInf);
    }
  }
  fixed_ = std::nextafter(static_cast<float>(c * bias_max * margin + 1e-30), kInf);
  return true;
#else
  (void)packed, (void)slab_stride, (void)bias;
  return false;
#endif
}

int64_t ArgMaxScreen::bytes() const {
  return static_cast<int64_t>(q_.size() + 4 * (scale_.size() + bias_.size() + per_norm_.size()));
}

const ArgMaxScreen* LazyArgMaxScreen::Get() const {
  absl::call_once(once_, [this] {
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

void ArgMaxScreen::Approximate(const float* x, int64_t rows, float* approx) const {
#if GLOSSA_SCREEN_X86
  const int64_t stride = slabs_ * kCols;
  const int8_t* q = q_.data();
  const float *sc = scale_.data(), *b = bias_.data();
  switch (rows) {
    case 1:
      return ApproximateRows<1>(q, in_, slabs_, x, sc, b, stride, approx);
    case 2:
      return ApproximateRows<2>(q, in_, slabs_, x, sc, b, stride, approx);
    case 3:
      return ApproximateRows<3>(q, in_, slabs_, x, sc, b, stride, approx);
    default:
      return ApproximateRows<4>(q, in_, slabs_, x, sc, b, stride, approx);
  }
#else
  (void)x, (void)rows, (void)approx;
#endif
}

bool ArgMaxScreen::Candidates(const float* x, const float* approx, std::vector<int>* ids) const {
#if GLOSSA_SCREEN_X86
  float norm = 0.0f;
  for (int64_t i = 0; i < in_; ++i) norm += std::fabs(x[i]);
  if (!std::isfinite(norm)) return false;
  const int64_t padded = slabs_ * kCols;
  const float lower = LowerMax(approx, per_norm_.data(), padded, norm, fixed_);
  if (!std::isfinite(lower)) return false;  // every id excluded
  ids->clear();
  return Above(approx, per_norm_.data(), out_, norm, fixed_, lower, kMaxCandidates, ids) &&
         !ids->empty();
#else
  (void)x, (void)approx, (void)ids;
  return false;
#endif
}

bool ArgMaxScreen::ArgMax(const float* x, int64_t rows, const int* excluded, const int* offsets,
                          int64_t* index, float* value) const {
#if GLOSSA_SCREEN_X86
  if (rows < 1 || rows > kMaxRows || declined_.load(std::memory_order_relaxed)) return false;
  Scratch& s = ThreadScratch();
  const int64_t stride = slabs_ * kCols;
  if (static_cast<int64_t>(s.approx.size()) < rows * stride) s.approx.resize(rows * stride);
  Approximate(x, rows, s.approx.data());
  for (int64_t r = 0; r < rows; ++r) {
    float* approx = s.approx.data() + r * stride;
    if (!AllFinite(approx, out_)) return false;
    std::fill(approx + out_, approx + stride, -kInf);
    for (int e = offsets[r]; e < offsets[r + 1]; ++e) {
      if (excluded[e] >= 0 && excluded[e] < out_) approx[excluded[e]] = -kInf;
    }
    const float* xr = x + r * in_;
    if (!Candidates(xr, approx, &s.ids)) return false;
    candidates_seen.fetch_add(static_cast<int64_t>(s.ids.size()), std::memory_order_relaxed);
    // Each candidate's slab in float32, by the Linear's kernel; the first largest wins.
    int64_t best = -1, slab = -1;
    float best_value = 0.0f;
    for (int id : s.ids) {
      if (id / kCols != slab) {
        slab = id / kCols;
        const int64_t first = slab * kCols;
        if (!linear_.ForwardColumns(xr, 1, first, std::min(kCols, out_ - first), s.exact)) {
          declined_.store(true, std::memory_order_relaxed);
          return false;
        }
      }
      const float v = s.exact[id - slab * kCols];
      if (!std::isfinite(v)) return false;
      if (best < 0 || v > best_value) {
        best = id;
        best_value = v;
      }
    }
    index[r] = best;
    value[r] = best_value;
  }
  rows_decided.fetch_add(rows, std::memory_order_relaxed);
  return true;
#else
  (void)x, (void)rows, (void)excluded, (void)offsets, (void)index, (void)value;
  return false;
#endif
}

}  // namespace glossa
