// Number formats for the reduced-precision compute types (bfloat16, int8) of Linear.
//
// Weights (once, at load):
//   - bfloat16: round to nearest even from float32; NaN stays NaN.
//   - int8: per output row symmetric: scale = max|w| / 127 (1 for an all-zero row),
//     q = clamp(nearbyint(w / scale), -127, 127), all in float32 arithmetic. This is exactly what
//     model_tools/glossa-convert --dtype int8 writes, so quantizing an fp32 file at load and
//     converting it offline give the same model.
// Activations (every call, per row so that a sentence's result never depends on the other rows
// it is batched with):
//   - int8: asymmetric u8 (the VNNI instruction multiplies u8 by s8): with lo = min(0, min x) and
//     hi = max(0, max x), scale = (hi - lo) / 255, zero point z = nearbyint(-lo / scale) and
//     q = clamp(nearbyint(x / scale) + z, 0, 255). Asymmetric because inputs such as a swish
//     output are mostly one-signed: a symmetric code would waste half its 256 levels (measured:
//     it changed 16% of the dev set's greedy outputs against float32, this 10%). The epilogue
//     takes z back out through the weights' column sums.
//   - int8 with residual codes (compute type int8; int8_fast stops at the codes above): a second
//     u8 code per value carries what the first one rounded off, r = x - scale * (q - z), which
//     lies in [-scale/2, scale/2]: q2 = clamp(nearbyint(r / scale * 254), -127, 127) + 128, so
//     x = scale * ((q - z) + (q2 - 128) / 254) to within scale / 508 (about 16 bits over the
//     row's range). Both codes go through the same s8 weights in one matmul of twice the rows,
//     and the epilogue adds the second result / 254. With this the int8 model agrees with float32
//     as often as weights quantized alone (int8 weights x float32 activations) do.
#ifndef GLOSSA_RUNTIME_OPS_QUANTIZE_H_
#define GLOSSA_RUNTIME_OPS_QUANTIZE_H_

#include <cstdint>

namespace glossa::quant {

uint16_t FloatToBf16(float x);
float Bf16ToFloat(uint16_t x);
void FloatToBf16(const float* x, int64_t n, uint16_t* out);

// IEEE half precision (binary16: 11 significant bits, largest finite value kHalfMax): the
// int8_fast decoder's cross-attention keys and values (layers/decoder.h). FloatToHalf rounds to
// nearest even with AVX-512's conversion and returns false, out unspecified, where this CPU has
// no AVX-512 or a value is NaN or beyond +-kHalfMax: the caller then keeps the floats.
constexpr float kHalfMax = 65504.0f;
bool FloatToHalf(const float* x, int64_t n, uint16_t* out);
float HalfToFloat(uint16_t h);

// w: [rows, cols] float32 -> q: [rows, cols] s8 and scales: [rows] (see above).
void QuantizeWeightRows(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);

// The residual code's zero point and its scale relative to the row's scale (see above).
constexpr int32_t kResidualZeroPoint = 128;
constexpr float kResidualSteps = 254.0f;

// x: [rows, cols] -> q: [rows, cols] u8, scales and zero_points: [rows]. With `residual`, q holds
// [2 * rows, cols]: rows `rows..2*rows-1` are the residual codes of rows 0..rows-1.
void QuantizeActivationRows(const float* x, int64_t rows, int64_t cols, uint8_t* q,
                            float* scales, int32_t* zero_points, bool residual = false);

// The int8 epilogue for one [rows, cols] output block:
//   v = (acc[r][c] - zero_points[r] * col_sums[c]) * row_scales[r] * col_scales[c] + bias[c]
//   (bias optional)
//   y[r][c] = accumulate ? y[r][c] + v : v
// With residual_acc ([rows, cols], the matmul of the residual codes), acc[r][c] - zero_points[r] *
// col_sums[c] becomes that plus (residual_acc[r][c] - 128 * col_sums[c]) / 254.
// acc and y may be the same memory (the int32 accumulator is then overwritten by the result).
void Dequantize(const int32_t* acc, int64_t rows, int64_t cols, const int32_t* col_sums,
                const int32_t* zero_points, const float* row_scales, const float* col_scales,
                const float* bias, bool accumulate, float* y,
                const int32_t* residual_acc = nullptr);

}  // namespace glossa::quant

#endif  // GLOSSA_RUNTIME_OPS_QUANTIZE_H_
