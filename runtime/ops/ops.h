// Small pure functions over dense float rows. They know nothing of models.
//
// The per-step vocabulary work of the search (log-softmax over the target vocabulary, then argmax
// or top-k) is the largest cost after the output projection, so the row functions below have
// AVX-512 kernels, chosen at run time (the binary stays portable, like layers/attention.h), and
// portable scalar ones. Their exp is Cephes' expf polynomial (within 2 ulp of the correctly
// rounded e^x wherever the result is a normal float, exactly 0 / +inf beyond the float range,
// NaN kept), instead of one libm call per element. The fused functions never write a row of
// log-probabilities: greedy needs only the argmax and the normaliser, beam search only the best
// 2·beams log-probabilities of each beam.
//
// Results are deterministic for given inputs on a given CPU; the AVX-512 and portable kernels sum
// in different orders, so the normalisers may differ in the last bits between the two.
#ifndef GLOSSA_RUNTIME_OPS_OPS_H_
#define GLOSSA_RUNTIME_OPS_OPS_H_

#include <cstdint>

namespace glossa::ops {

// x[rows, dim] = (x - mean) / sqrt(var + eps) * gamma + beta, per row (biased variance). The
// sums run in 64 lanes then pairwise, in the same order with AVX-512 and without: both kernels
// give the same bits.
void LayerNorm(float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta,
               float eps);

// In place over one row: x = softmax(x).
void Softmax(float* x, int64_t n);

// In place over one row: x = log_softmax(x) = (x - max) - log(sum(exp(x - max))), PyTorch's
// order of operations. -inf stays -inf.
void LogSoftmax(float* x, int64_t n);

// y[i] = e^x[i] (see above for the accuracy). x and y may be the same array.
void Exp(const float* x, int64_t n, float* y);

// In place: x = x / (1 + e^-x) (SiLU), with the exp above.
void Swish(float* x, int64_t n);

// The normaliser of a row: log_softmax(x)[i] == (x[i] - max) - log_sum, bit for bit the value
// LogSoftmax writes.
struct LogSumExp {
  float max = 0.0f;      // largest element (-inf for a row of -inf)
  float log_sum = 0.0f;  // log(sum(exp(x - max)))
};
LogSumExp ComputeLogSumExp(const float* x, int64_t n);

// Greedy search's whole pass over the logits: the index of the largest value (the first one on
// ties, as ArgMax) and the row's LogSumExp. n >= 1.
struct ArgMaxLogSumExp {
  int64_t index = 0;
  LogSumExp lse;
};
ArgMaxLogSumExp ComputeArgMaxLogSumExp(const float* x, int64_t n);

struct ScoredId {
  float score;
  int32_t id;
};

// The k best of s[i] = ((x[i] - lse.max) - lse.log_sum) + offset, i.e. log_softmax(x) + offset
// with LogSoftmax's exact values, without writing them: best[0..min(k, n)) is filled, largest
// score first, the lower index first among equal scores (so -inf entries come last, in index
// order). Returns min(k, n). The same as LogSoftmax, adding offset and a stable sort.
int TopKLogProbs(const float* x, int64_t n, LogSumExp lse, float offset, int k, ScoredId* best);

// out[i, :] = table[ids[i], :] * scale + positions[pos[i], :]  (token embedding plus position).
void EmbedTokens(const float* table, const float* positions, const int* ids, const int* pos,
                 int64_t rows, int64_t dim, float scale, float* out);

// Index of the largest value (the first one on ties, like torch.argmax).
int64_t ArgMax(const float* x, int64_t n);

namespace internal {
// Whether the row functions above use their AVX-512 kernels: true where the CPU has AVX-512F,
// unless turned off. Tests turn them off to check the portable kernels on the same machine.
bool Avx512Enabled();
void SetAvx512Enabled(bool enabled);  // true has no effect where the CPU lacks AVX-512F
// Whether the CPU has AVX-512F (whatever SetAvx512Enabled says; ops/gemv.cc checks it too).
bool CpuHasAvx512F();
}  // namespace internal

}  // namespace glossa::ops

#endif  // GLOSSA_RUNTIME_OPS_OPS_H_
