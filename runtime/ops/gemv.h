// Products of up to kMaxRows rows with a float32 weight matrix held in oneDNN's packed layout:
// the decoder's steps (batch 1: greedy 1 row, beam 4 four rows; greedy batch 32: 32 rows).
//
// Why: the decoder's weights do not stay in cache from one step to the next, so a step streams
// them all from memory, and at these row counts that stream is most of its time. oneDNN's brgemm
// reads one 64-column slab of the packed layout at a time and computes on it once it arrives:
// 9-12 GB/s on one core here at 1 row. This kernel keeps more of the stream in flight:
//  - 1 to 4 rows read 2-4 slabs at once: 11-15 GB/s, 1.3-1.4x (four rows run as two passes of
//    two over every 32 inputs: their accumulators would not fit in the registers at once);
//  - 5 to kMaxRows rows take one slab at a time, the rows in groups of 6 (24 accumulators) over
//    blocks of 64 inputs that stay in L1, and prefetch the weights 128 KB ahead into L2 while
//    they compute, so the stream overlaps the arithmetic. An OPUS-MT base decoder step at 32
//    rows: 61-74 ms against oneDNN's 82-102 ms in the machine's faster spells, close to even in
//    its slower ones (BM_SmallRows, weights from DRAM); end to end, greedy batch 32 on one
//    thread +11-23% (base, big, demo). Each group of 6 rows is written as oneDNN's brgemm loop
//    (named accumulators, inputs 4 at a time): +8-12% over the first version at 32 rows where
//    the weights come from cache (demo, big). At 64 and 128 rows it and oneDNN were within
//    ±10% of each other, ahead on some shapes and behind on others.
// Both are measured in tests/bench/linear_bench's BM_SmallRows.
//
// Which calls: pieces of up to kMaxCachedRows rows always; up to kMaxRows while a
// StreamingScope is alive on the calling thread (the decoder's steps: beam 4 at batch 32 runs
// pieces of 33-64 rows). There the weights stream from memory every call, and oneDNN's kernel,
// whose own prefetch runs under 2 KB ahead, waits for them in its inner loop: on the 2-core
// Zen 5 VM, where such waits come and go from one run to the next, OPUS-MT base beam 4 batch 32
// on one core gave median 328 target tokens/s against 275 with oneDNN for 33-64 rows (11
// alternating pairs; 240-363 against 223-365), the demo's beam 4 -1% (3 pairs). The encoder
// reuses each weight matrix for many pieces from cache, where oneDNN is faster: it keeps
// oneDNN above kMaxCachedRows.
//
// Exactness: the kernel sums each output in the same order as oneDNN's f32 brgemm, so results
// are bit-identical to the matmul they replace and to every other row count (a sentence's output
// does not depend on its batch). That order is oneDNN's choice — within chunks of the input
// dimension, one FMA chain per output, the chunks' sums added in order — and the chunk length
// depends on the input size (512 or 1024 with oneDNN 2.6). MatchingChunk finds it by running
// oneDNN beside this kernel on synthetic weights, once per (input size, bias, accumulation,
// activation, thread count); when no chunk length matches, callers keep oneDNN.
#ifndef GLOSSA_RUNTIME_OPS_GEMV_H_
#define GLOSSA_RUNTIME_OPS_GEMV_H_

#include <cstdint>

#include "oneapi/dnnl/dnnl.hpp"
#include "ops/linear.h"

namespace glossa::gemv {

constexpr int64_t kMaxRows = 64;        // inside a StreamingScope
constexpr int64_t kMaxCachedRows = 32;  // outside one
constexpr int64_t kSlabCols = 64;  // output columns per slab of the packed layout

// Floats between consecutive 64-column slabs when `packed` (the weights {in, out}) has the
// layout this kernel reads — blocks of 16 inputs x 64 outputs, inputs fastest across blocks
// (oneDNN's BA16a64b) — else 0.
int64_t SlabStride(const dnnl::memory::desc& packed, int64_t in);

// One slab of the packed layout (BA16a64b, SlabStride floats: [in rounded up to 16][64]) from
// `cols` (1..64) rows of plain [out, in] weights, `plain` pointing at the first: element (i, c)
// is plain[c * in + i], zero past `cols` and past `in`. AVX-512F: 16 x 16 tiles transposed in
// registers (OPUS-MT big's 256 KB slabs ~4x faster than a scalar copy).
void PlainToSlab(const float* plain, int64_t in, int64_t cols, float* slab);

// The input chunk with which Forward reproduces oneDNN's f32 matmul bit for bit at this thread's
// OpenMP team size, or 0 when none does or the CPU lacks AVX-512F.
int64_t MatchingChunk(int64_t in, bool bias, bool accumulate, Activation activation);

struct PackedWeights {
  const float* data;  // oneDNN's packed copy (BA16a64b)
  int64_t in, out;
  int64_t slab;   // SlabStride
  int64_t chunk;  // MatchingChunk
};

// y[rows, out] = act(x[rows, in] · W + bias), or y += x · W + bias with accumulate (no
// activation then); rows in 1..kMaxRows, bias may be null. Uses the caller's OpenMP team size.
void Forward(const PackedWeights& w, const float* x, int64_t rows, const float* bias,
             bool accumulate, Activation activation, float* y);

// While alive, float32 Linear products of up to kMaxRows rows on this thread run this kernel
// (see "Which calls" above). Scopes nest.
class StreamingScope {
 public:
  StreamingScope();
  ~StreamingScope();
  StreamingScope(const StreamingScope&) = delete;
  StreamingScope& operator=(const StreamingScope&) = delete;
};

// The most rows a call on this thread may hand to the kernel now: kMaxRows inside a
// StreamingScope, kMaxCachedRows outside.
int64_t RowLimit();

namespace internal {
// Whether Linear uses this kernel where it can: true where the CPU has AVX-512F, unless turned
// off (tests and benchmarks compare both paths on one machine).
bool Enabled();
void SetEnabled(bool enabled);
}  // namespace internal

}  // namespace glossa::gemv

#endif  // GLOSSA_RUNTIME_OPS_GEMV_H_
