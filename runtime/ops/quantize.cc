#include "ops/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

// GCC 12 reports its own _mm512_reduce_* / _mm512_undefined_* intrinsics as reading
// uninitialized values once inlined here (a false positive of its headers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace glossa::quant {
namespace {

// Rounds to the nearest integer (ties to even, as the default SSE/AVX rounding mode does) and
// clamps to [-127, 127]; NaN becomes -127, as the vector conversion's "integer indefinite" does
// after the clamp.
int ClampRound127(float v) {
  v = std::nearbyint(v);
  return v >= -127.0f ? (v <= 127.0f ? static_cast<int>(v) : 127) : -127;
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

__mmask16 TailMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// The u8 code of x / scale + zero_point; NaN becomes 0, as the vector conversion's "integer
// indefinite" does after the clamp.
uint8_t ClampRoundU8(float v, int zero_point) {
  v = std::nearbyint(v) + static_cast<float>(zero_point);
  return static_cast<uint8_t>(v >= 0.0f ? (v <= 255.0f ? v : 255.0f) : 0.0f);
}

// Scale and zero point of a row whose values lie in [lo, hi], lo <= 0 <= hi.
void RowRange(float lo, float hi, float* scale, int32_t* zero_point) {
  const float s = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float z = std::nearbyint(-lo / s);
  *scale = s;
  *zero_point = z >= 0.0f ? (z <= 255.0f ? static_cast<int32_t>(z) : 255) : 0;
}

__attribute__((target("avx512f"))) void QuantizeRowAvx512(const float* x, int64_t n, uint8_t* q,
                                                           float* scale, int32_t* zero_point,
                                                           uint8_t* residual) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  for (int64_t c = 0; c < n; c += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask(n - c), x + c);  // masked lanes read 0
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
  }
  RowRange(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), scale, zero_point);
  const __m512 vs = _mm512_set1_ps(*scale);
  const __m512i z = _mm512_set1_epi32(*zero_point), zero = _mm512_setzero_si512(),
                top = _mm512_set1_epi32(255);
  const __m512 steps = _mm512_set1_ps(kResidualSteps);
  const __m512i rz = _mm512_set1_epi32(kResidualZeroPoint), rlo = _mm512_set1_epi32(-127),
                rhi = _mm512_set1_epi32(127);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 mask = TailMask(n - c);
    const __m512 t = _mm512_div_ps(_mm512_maskz_loadu_ps(mask, x + c), vs);
    const __m512i shifted = _mm512_add_epi32(_mm512_cvtps_epi32(t), z);
    const __m512i v = _mm512_min_epi32(_mm512_max_epi32(shifted, zero), top);
    _mm512_mask_cvtepi32_storeu_epi8(q + c, mask, v);
    if (residual == nullptr) continue;
    // r / scale = t - (q - z), as the scalar code computes it.
    const __m512 frac = _mm512_sub_ps(t, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, z)));
    __m512i w = _mm512_cvtps_epi32(_mm512_mul_ps(frac, steps));
    w = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(w, rlo), rhi), rz);
    _mm512_mask_cvtepi32_storeu_epi8(residual + c, mask, w);
  }
}

void QuantizeRowScalar(const float* x, int64_t n, uint8_t* q, float* scale, int32_t* zero_point,
                       uint8_t* residual) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t c = 0; c < n; ++c) {
    lo = x[c] < lo ? x[c] : lo;
    hi = x[c] > hi ? x[c] : hi;
  }
  RowRange(lo, hi, scale, zero_point);
  for (int64_t c = 0; c < n; ++c) {
    const float t = x[c] / *scale;
    q[c] = ClampRoundU8(t, *zero_point);
    if (residual == nullptr) continue;
    const float frac = t - static_cast<float>(static_cast<int32_t>(q[c]) - *zero_point);
    residual[c] = static_cast<uint8_t>(ClampRound127(frac * kResidualSteps) + kResidualZeroPoint);
  }
}

// acc and y may alias: every element is read before it is written, and this file is compiled with
// -fno-strict-aliasing (see runtime/CMakeLists.txt).
__attribute__((target("avx512f"))) void DequantizeRowAvx512(
    const int32_t* acc, int64_t n, const int32_t* col_sums, int32_t zero_point, float row_scale,
    const float* col_scales, const float* bias, bool accumulate, float* y,
    const int32_t* residual_acc) {
  const __m512 rs = _mm512_set1_ps(row_scale), inv_steps = _mm512_set1_ps(1.0f / kResidualSteps);
  const __m512i z = _mm512_set1_epi32(zero_point), rz = _mm512_set1_epi32(kResidualZeroPoint);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 mask = TailMask(n - c);
    const __m512i sums = _mm512_maskz_loadu_epi32(mask, col_sums + c);
    const __m512i a = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(mask, acc + c),
                                       _mm512_mullo_epi32(z, sums));
    __m512 codes = _mm512_cvtepi32_ps(a);
    if (residual_acc != nullptr) {
      const __m512i b = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(mask, residual_acc + c),
                                         _mm512_mullo_epi32(rz, sums));
      codes = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), inv_steps, codes);
    }
    __m512 v = _mm512_mul_ps(codes, _mm512_mul_ps(rs, _mm512_maskz_loadu_ps(mask, col_scales + c)));
    if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias + c));
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + c), v);
    _mm512_mask_storeu_ps(y + c, mask, v);
  }
}

void DequantizeRowScalar(const int32_t* acc, int64_t n, const int32_t* col_sums,
                         int32_t zero_point, float row_scale, const float* col_scales,
                         const float* bias, bool accumulate, float* y,
                         const int32_t* residual_acc) {
  for (int64_t c = 0; c < n; ++c) {
    float codes = static_cast<float>(acc[c] - zero_point * col_sums[c]);
    if (residual_acc != nullptr) {
      codes = std::fma(static_cast<float>(residual_acc[c] - kResidualZeroPoint * col_sums[c]),
                       1.0f / kResidualSteps, codes);
    }
    float v = codes * (row_scale * col_scales[c]);
    if (bias != nullptr) v += bias[c];
    y[c] = accumulate ? y[c] + v : v;
  }
}

}  // namespace

uint16_t FloatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

void FloatToBf16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

namespace {

__attribute__((target("avx512f"))) bool FloatToHalfAvx512(const float* x, int64_t n,
                                                          uint16_t* out) {
  const __m512 limit = _mm512_set1_ps(kHalfMax);
  __mmask16 bad = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    // Not (|v| <= max), so that NaN counts too.
    bad |= _mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(v), limit, _CMP_NLE_UQ);
    alignas(32) uint16_t h[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(h),
                       _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    std::memcpy(out + i, h, static_cast<size_t>(std::min<int64_t>(16, n - i)) * sizeof(h[0]));
  }
  return bad == 0;
}

}  // namespace

bool FloatToHalf(const float* x, int64_t n, uint16_t* out) {
  return HasAvx512() && FloatToHalfAvx512(x, n, out);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  uint32_t u;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&u, &magnitude, sizeof(u));
    u |= sign;
  } else if (exponent == 0x1F) {  // infinity or NaN
    u = sign | 0x7F800000u | (mantissa << 13);
  } else {
    u = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

void QuantizeWeightRows(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float m = 0.0f;
    for (int64_t c = 0; c < cols; ++c) m = std::fabs(row[c]) > m ? std::fabs(row[c]) : m;
    const float s = m > 0.0f ? m / 127.0f : 1.0f;
    scales[r] = s;
    for (int64_t c = 0; c < cols; ++c) q[r * cols + c] = static_cast<int8_t>(ClampRound127(row[c] / s));
  }
}

void QuantizeActivationRows(const float* x, int64_t rows, int64_t cols, uint8_t* q,
                            float* scales, int32_t* zero_points, bool residual) {
  const bool avx512 = HasAvx512();
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* rest = residual ? q + (rows + r) * cols : nullptr;
    if (avx512) {
      QuantizeRowAvx512(x + r * cols, cols, q + r * cols, scales + r, zero_points + r, rest);
    } else {
      QuantizeRowScalar(x + r * cols, cols, q + r * cols, scales + r, zero_points + r, rest);
    }
  }
}

void Dequantize(const int32_t* acc, int64_t rows, int64_t cols, const int32_t* col_sums,
                const int32_t* zero_points, const float* row_scales, const float* col_scales,
                const float* bias, bool accumulate, float* y, const int32_t* residual_acc) {
  const bool avx512 = HasAvx512();
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* rest = residual_acc != nullptr ? residual_acc + r * cols : nullptr;
    if (avx512) {
      DequantizeRowAvx512(acc + r * cols, cols, col_sums, zero_points[r], row_scales[r],
                          col_scales, bias, accumulate, y + r * cols, rest);
    } else {
      DequantizeRowScalar(acc + r * cols, cols, col_sums, zero_points[r], row_scales[r],
                          col_scales, bias, accumulate, y + r * cols, rest);
    }
  }
}

}  // namespace glossa::quant
