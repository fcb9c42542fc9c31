// Small pure functions over dense float rows. They know nothing of models.
//
// The per-step vocabulary work of the search (log-softmax over the target vocabulary, then argmax
// or top-k) is the largest cost after the output projection, so the row functions below have
// AVX-512 kernels, chosen at run time (the binary stays portable, like layers/attention.h), and
// portable scalar ones. Their exp is Cephes' expf polynomial (within 2 ulp of the correctly
// rounded e^x wherever the result is a normal float, exactly 0 / +inf beyond the float range,
// NaN kept), instead of one libm call per element. The fused functions never write a row of
// log-probabilities: greedy needs only the argmax and the normaliser (without scores, the argmax
// alone: ComputeBlockArgMax), beam search only the best 2·beams log-probabilities of each beam.
//
// Results are deterministic for given inputs on a given CPU; the AVX-512 and portable kernels sum
// in different orders, so the normalisers may differ in the last bits between the two.
#ifndef GLOSSA_RUNTIME_OPS_OPS_H_
#define GLOSSA_RUNTIME_OPS_OPS_H_

#include <cstdint>
#include <functional>
#include <memory>

namespace glossa::ops {

// How a few rows of a large stored table are read: copied from `from` (inside the table) to `to`.
// Empty: read in place. Weights left in a model file give ModelFile::CopyOut, which reads the
// file (pread) instead of its mapping: the pages stay out of this process's memory, and a file
// overwritten in place after the load is noticed instead of read.
using StoredCopy = std::function<void(const void* from, uint64_t bytes, void* to)>;

class RowCache;  // ops/row_cache.h

// A [rows, dim] float table and how its rows are read: in place (no copy), or through copy, from
// cache where there is one.
struct StoredTable {
  const float* rows = nullptr;
  StoredCopy copy;
  std::shared_ptr<RowCache> cache;  // optional, with copy: the rows it keeps
};

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
//
// It is summed in blocks of kSoftmaxBlock elements: each block's largest value m_b and
// s_b = sum(exp(x - m_b)) over the block, then the blocks in order into a running (max, sum):
// a block with a larger m_b rescales the sum so far by exp(max - m_b), one with a smaller m_b
// adds s_b * exp(m_b - max) (in double; a block of -inf adds nothing). A row within one block
// gets plain log(sum(exp(x - max))). Blocking lets the caller that produces a row block by
// block (the output projection, in column blocks) compute the normaliser while each block is
// still in cache, with ComputeBlockStats and SoftmaxAccumulator: the same bits as
// ComputeArgMaxLogSumExp, and a row is read from memory once (the max and the sum of a block
// are two passes over 4 KB in L1).
struct LogSumExp {
  float max = 0.0f;      // largest element (-inf for a row of -inf)
  float log_sum = 0.0f;  // log(sum(exp(x - max)))
};
LogSumExp ComputeLogSumExp(const float* x, int64_t n);

constexpr int64_t kSoftmaxBlock = 1024;

// Greedy search's whole pass over the logits: the index of the largest value (the first one on
// ties, as ArgMax) and the row's LogSumExp. n >= 1.
struct ArgMaxLogSumExp {
  int64_t index = 0;
  LogSumExp lse;
};
ArgMaxLogSumExp ComputeArgMaxLogSumExp(const float* x, int64_t n);

// One block of a row, for ComputeArgMaxLogSumExp's result assembled block by block.
struct BlockStats {
  float max = 0.0f;         // m_b (NaNs are skipped, as ArgMax skips them; -inf if all are)
  float sum_exp = 0.0f;     // s_b
  int32_t argmax = 0;       // first index of m_b within the block (0 when nothing compares)
  bool starts_nan = false;  // x[0] is NaN (ArgMax then answers 0)
};
// x[0, n) is one block, 1 <= n <= kSoftmaxBlock.
BlockStats ComputeBlockStats(const float* x, int64_t n);
// For a caller that wants only the argmax (greedy search without scores): ComputeBlockStats's
// max, argmax and starts_nan, without the exponentials. sum_exp is NaN where ComputeBlockStats's
// is (the block has a NaN, or its max is infinite) and 1 elsewhere, so that a
// SoftmaxAccumulator of such blocks has ComputeArgMaxLogSumExp's index and max, and a log_sum
// that is finite exactly where that one's is (its value means nothing else).
BlockStats ComputeBlockArgMax(const float* x, int64_t n);

// A row's blocks, added in order (each kSoftmaxBlock long but the last): Result() is bit for bit
// ComputeArgMaxLogSumExp over the whole row.
class SoftmaxAccumulator {
 public:
  void Add(const BlockStats& block);
  ArgMaxLogSumExp Result() const;

 private:
  int64_t blocks_ = 0;
  float max_ = 0.0f;
  double sum_ = 0.0;
  int64_t index_ = 0;
  bool starts_nan_ = false;
};

struct ScoredId {
  float score;
  int32_t id;
};

// The k best of s[i] = ((x[i] - lse.max) - lse.log_sum) + offset, i.e. log_softmax(x) + offset
// with LogSoftmax's exact values, without writing them: best[0..min(k, n)) is filled, largest
// score first, the lower index first among equal scores (so -inf entries come last, in index
// order). Returns min(k, n). The same as LogSoftmax, adding offset and a stable sort.
int TopKLogProbs(const float* x, int64_t n, LogSumExp lse, float offset, int k, ScoredId* best);

// A running top k of a row's raw values, seen block by block: merges x[0, n) (indices
// first_index + i) into best[0, kept) and returns the new count (<= k). best stays sorted largest
// first, the lower index first among equal values, as if the whole row had been scanned at once
// in index order; NaNs never enter.
int UpdateTopK(const float* x, int64_t n, int32_t first_index, int k, ScoredId* best, int kept);

// out[i, :] = table[ids[i], :] * scale + positions[pos[i], :]  (token embedding plus position);
// where table.copy is set, each distinct id's row is read through it once per call.
void EmbedTokens(const StoredTable& table, const float* positions, const int* ids,
                 const int* pos, int64_t rows, int64_t dim, float scale, float* out);

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
