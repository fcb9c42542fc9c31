// AVX-512 building blocks shared by the vocabulary kernels (ops/ops.cc) and attention
// (layers/attention.h). Include only inside `#if` blocks for x86-64 GCC/Clang; every function is
// compiled for AVX-512F by its target attribute, so callers must check the CPU first.
#ifndef GLOSSA_RUNTIME_OPS_AVX512_MATH_H_
#define GLOSSA_RUNTIME_OPS_AVX512_MATH_H_

#include <immintrin.h>

#include <cstdint>

namespace glossa::avx512 {

// Mask of the first `lanes` (0..16; fewer than 0 counts as 0) lanes.
inline __mmask16 LaneMask(int64_t lanes) {
  return lanes >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>((1u << (lanes > 0 ? lanes : 0)) - 1u);
}

// e^x, lane by lane: Cephes' expf (range reduction by ln 2 in two parts, degree-6 polynomial,
// 2^n by scalef), within 1 ulp of the correctly rounded value over [-120, 100] (ops_test). x is
// first clamped to [-110, 88.8] (NaN passes through: vmaxps/vminps return their second operand
// when one is NaN), so -inf gives 0 and +inf gives +inf instead of NaN.
__attribute__((target("avx512f"))) inline __m512 Exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-110.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

}  // namespace glossa::avx512

#endif  // GLOSSA_RUNTIME_OPS_AVX512_MATH_H_
