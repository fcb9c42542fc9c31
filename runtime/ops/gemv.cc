#include "ops/gemv.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "ops/ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GLOSSA_GEMV_X86 1
#include <immintrin.h>

#include "ops/avx512_math.h"
#else
#define GLOSSA_GEMV_X86 0
#endif

namespace glossa::gemv {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

constexpr int64_t kBlockIn = 16;   // inputs per block of the packed layout

// oneDNN's eltwise for the activations it applies as post-ops other than relu, run on y after
// the kernel: the same JIT code as the post-op, so the same bits (MatchingChunk checks).
void ApplyEltwise(Activation activation, float* y, int64_t n) {
  using Key = std::pair<int64_t, int>;
  struct Entry {
    dnnl::eltwise_forward primitive;
    memory data;
  };
  thread_local absl::flat_hash_map<Key, Entry> cache;
  const Key key{n, static_cast<int>(activation)};
  auto it = cache.find(key);
  if (it == cache.end()) {
    const memory::desc desc({n}, dt::f32, tag::a);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference,
                                    EltwiseAlgorithm(activation), desc, EltwiseAlpha(activation),
                                    0.0f),
        CpuEngine());
    it = cache.emplace(key, Entry{dnnl::eltwise_forward(pd), memory(desc, CpuEngine(), y)}).first;
  }
  it->second.data.set_data_handle(y);
  // The C API with an args array: the C++ one builds a map per call (decoder steps allocate
  // nothing once warm: alloc_test).
  const dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, it->second.data.get()},
                                   {DNNL_ARG_DST, it->second.data.get()}};
  dnnl::stream& stream = ThreadStream();
  const dnnl_status_t status =
      dnnl_primitive_execute(it->second.primitive.get(), stream.get(), 2, args);
  if (status != dnnl_success) throw dnnl::error(status, "gemv: eltwise execution failed");
  stream.wait();
}

#if GLOSSA_GEMV_X86
// Inputs [k0, k1) of NB slabs of 64 outputs for M rows, in registers (one FMA chain per output),
// continuing the partial sums in `part` ([M][NB * 64]; from zero with `fresh`): 1 to 4 rows.
// Not instrumented by the sanitizers (as oneDNN's JIT code, which it replaces, is not): with
// their checks in this loop, the ASan+UBSan pass decoded 3x slower and python_batch ran past its
// 420 s limit (126 s before the kernel took 5-32 rows; the address checks alone removed: 379 s).
// Its callers, and the bounds they pass, are instrumented; SmallRowsTest checks its results bit
// for bit.
template <int M, int NB>
__attribute__((target("avx512f"), no_sanitize("address", "undefined"))) void PartSums(
    const float* w, int64_t in, int64_t slab, int64_t k0, int64_t k1, const float* x, float* part,
    bool fresh) {
  __m512 acc[M][NB][4];
  for (int m = 0; m < M; ++m) {
    for (int b = 0; b < NB; ++b) {
      for (int j = 0; j < 4; ++j) {
        acc[m][b][j] = fresh ? _mm512_setzero_ps()
                             : _mm512_load_ps(part + (m * NB + b) * kSlabCols + j * 16);
      }
    }
  }
  for (int64_t k = k0; k < k1; ++k) {
    for (int b = 0; b < NB; ++b) {
      const float* p = w + b * slab + k * kSlabCols;
      const __m512 w0 = _mm512_load_ps(p), w1 = _mm512_load_ps(p + 16),
                   w2 = _mm512_load_ps(p + 32), w3 = _mm512_load_ps(p + 48);
      for (int m = 0; m < M; ++m) {
        const __m512 xm = _mm512_set1_ps(x[m * in + k]);
        acc[m][b][0] = _mm512_fmadd_ps(xm, w0, acc[m][b][0]);
        acc[m][b][1] = _mm512_fmadd_ps(xm, w1, acc[m][b][1]);
        acc[m][b][2] = _mm512_fmadd_ps(xm, w2, acc[m][b][2]);
        acc[m][b][3] = _mm512_fmadd_ps(xm, w3, acc[m][b][3]);
      }
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int b = 0; b < NB; ++b) {
      for (int j = 0; j < 4; ++j) {
        _mm512_store_ps(part + (m * NB + b) * kSlabCols + j * 16, acc[m][b][j]);
      }
    }
  }
}

// M (1..6) rows over inputs [k0, k1) of one slab (64 outputs), continuing the partial sums in
// `part` ([M][64]; from zero with `fresh`): 4M accumulators, one FMA chain per output in input
// order. Named accumulators rather than an array, and the inputs 4 at a time: GCC then keeps
// them in registers with no per-input overhead (with arrays it copied them through the stack at
// every call, and the group ran ~9% slower). With `pf`, every 4 inputs also prefetch
// 4 * pf_lines cache lines from pf on into L2. Not instrumented by the sanitizers, as PartSums.
#define GLOSSA_ROW(M, i, r, body) \
  if constexpr (M > i) {          \
    body(r, i);                   \
  }
#define GLOSSA_ROWS(M, body)                                                              \
  GLOSSA_ROW(M, 0, a, body) GLOSSA_ROW(M, 1, b, body) GLOSSA_ROW(M, 2, c, body)           \
      GLOSSA_ROW(M, 3, d, body) GLOSSA_ROW(M, 4, e, body) GLOSSA_ROW(M, 5, f, body)
#define GLOSSA_INIT(r, i)                                                    \
  r##0 = fresh ? _mm512_setzero_ps() : _mm512_load_ps(part + (i) * 64);       \
  r##1 = fresh ? _mm512_setzero_ps() : _mm512_load_ps(part + (i) * 64 + 16);  \
  r##2 = fresh ? _mm512_setzero_ps() : _mm512_load_ps(part + (i) * 64 + 32);  \
  r##3 = fresh ? _mm512_setzero_ps() : _mm512_load_ps(part + (i) * 64 + 48);
#define GLOSSA_FMA(r, i)                                \
  {                                                     \
    const __m512 xv = _mm512_set1_ps(x##i[k]);          \
    r##0 = _mm512_fmadd_ps(xv, w0, r##0);               \
    r##1 = _mm512_fmadd_ps(xv, w1, r##1);               \
    r##2 = _mm512_fmadd_ps(xv, w2, r##2);               \
    r##3 = _mm512_fmadd_ps(xv, w3, r##3);               \
  }
#define GLOSSA_STORE(r, i)                       \
  _mm512_store_ps(part + (i) * 64, r##0);        \
  _mm512_store_ps(part + (i) * 64 + 16, r##1);   \
  _mm512_store_ps(part + (i) * 64 + 32, r##2);   \
  _mm512_store_ps(part + (i) * 64 + 48, r##3);
template <int M>
__attribute__((target("avx512f"), no_sanitize("address", "undefined"))) void GroupRows(
    const float* w, int64_t in, int64_t k0, int64_t k1, const float* x, float* part, bool fresh,
    const char* pf, int pf_lines) {
  static_assert(M >= 1 && M <= 6);
  // Row i's inputs (only the group's rows are ever read).
  const float *x0 = x, *x1 = x + (M > 1) * in, *x2 = x + (M > 2) * 2 * in,
              *x3 = x + (M > 3) * 3 * in, *x4 = x + (M > 4) * 4 * in, *x5 = x + (M > 5) * 5 * in;
  __m512 a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3, e0, e1, e2, e3, f0, f1,
      f2, f3;
  GLOSSA_ROWS(M, GLOSSA_INIT)
  auto step = [&](int64_t k) __attribute__((always_inline, target("avx512f"))) {
    const float* p = w + k * kSlabCols;
    const __m512 w0 = _mm512_load_ps(p), w1 = _mm512_load_ps(p + 16),
                 w2 = _mm512_load_ps(p + 32), w3 = _mm512_load_ps(p + 48);
    GLOSSA_ROWS(M, GLOSSA_FMA)
  };
  int64_t k = k0;
  const int pf_step = 4 * pf_lines;
  if (pf != nullptr) {
    for (; k + 4 <= k1; k += 4) {
      for (int i = 0; i < pf_step; ++i) _mm_prefetch(pf + i * 64, _MM_HINT_T1);
      pf += pf_step * 64;
      step(k), step(k + 1), step(k + 2), step(k + 3);
    }
  } else {
    for (; k + 4 <= k1; k += 4) step(k), step(k + 1), step(k + 2), step(k + 3);
  }
  for (; k < k1; ++k) step(k);
  GLOSSA_ROWS(M, GLOSSA_STORE)
}
#undef GLOSSA_ROW
#undef GLOSSA_ROWS
#undef GLOSSA_INIT
#undef GLOSSA_FMA
#undef GLOSSA_STORE

// sums[0, n) = part (first chunk) or sums + part: the chunks' sums added in order.
__attribute__((target("avx512f"))) void AddInto(const float* part, int64_t n, bool first,
                                                float* sums) {
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 p = _mm512_load_ps(part + i);
    _mm512_store_ps(sums + i, first ? p : _mm512_add_ps(_mm512_load_ps(sums + i), p));
  }
}

// The sums of NB slabs for M rows: each chunk's own sum, added to the previous chunks' in order.
// Four rows' accumulators would not fit in the 32 vector registers, so they run as two passes of
// two rows over every 32 inputs (the second pass reads them from L1; storing and reloading a
// partial sum does not change it).
template <int M, int NB>
__attribute__((target("avx512f"))) void SumSlabs(const float* w, int64_t in, int64_t slab,
                                                 int64_t chunk, const float* x, float* sums) {
  constexpr int kPass = M == 4 ? 2 : M;
  alignas(64) float part[M * NB * kSlabCols] = {};  // zeroed only to quiet -Wmaybe-uninitialized
  for (int64_t k0 = 0; k0 < in; k0 += chunk) {
    const int64_t k1 = std::min(in, k0 + chunk);
    const int64_t step = M == kPass ? k1 - k0 : 32;
    for (int64_t k = k0; k < k1; k += step) {
      for (int m = 0; m < M; m += kPass) {
        PartSums<kPass, NB>(w, in, slab, k, std::min(k1, k + step), x + m * in,
                            part + m * NB * kSlabCols, k == k0);
      }
    }
    AddInto(part, M * NB * kSlabCols, k0 == 0, sums);
  }
}

// y[m, first .. first + cols) from the sums, as oneDNN's epilogue: (sum + bias) + y, then relu.
__attribute__((target("avx512f"))) void Finish(const float* sums, int64_t first, int64_t cols,
                                               const float* bias, bool accumulate, bool relu,
                                               float* y) {
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 mask = avx512::LaneMask(cols - c);
    __m512 v = _mm512_load_ps(sums + c);
    if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias + first + c));
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y + first + c));
    // As oneDNN's relu (slope 0), i.e. vmaxps(v, 0): v where v > 0, else +0 (NaN included).
    if (relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
    _mm512_mask_storeu_ps(y + first + c, mask, v);
  }
}

// y for `count` slabs from slab `s0`, once their sums are in `sums` ([rows][count * 64]).
void FinishSlabs(const PackedWeights& w, const float* sums, int64_t rows, int64_t s0,
                 int64_t count, const float* bias, bool accumulate, bool relu, float* y) {
  const int64_t first = s0 * kSlabCols, cols = std::min(count * kSlabCols, w.out - first);
  for (int64_t m = 0; m < rows; ++m) {
    Finish(sums + m * count * kSlabCols, first, cols, bias, accumulate, relu, y + m * w.out);
  }
}

// Slab groups [g0, g1) of NB slabs; a last group of fewer slabs runs one slab at a time.
template <int M, int NB>
void RunGroups(const PackedWeights& w, const float* x, int64_t g0, int64_t g1, const float* bias,
               bool accumulate, bool relu, float* y) {
  alignas(64) float sums[M * NB * kSlabCols];
  const int64_t slabs = (w.out + kSlabCols - 1) / kSlabCols;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t s0 = g * NB;
    if (slabs - s0 >= NB) {
      SumSlabs<M, NB>(w.data + s0 * w.slab, w.in, w.slab, w.chunk, x, sums);
      FinishSlabs(w, sums, M, s0, NB, bias, accumulate, relu, y);
      continue;
    }
    for (int64_t s = s0; s < slabs; ++s) {
      SumSlabs<M, 1>(w.data + s * w.slab, w.in, w.slab, w.chunk, x, sums);
      FinishSlabs(w, sums, M, s, 1, bias, accumulate, relu, y);
    }
  }
}

template <int M, int NB>
void ForwardRows(const PackedWeights& w, const float* x, const float* bias, bool accumulate,
                 bool relu, float* y) {
  const int64_t slabs = (w.out + kSlabCols - 1) / kSlabCols;
  const int64_t groups = (slabs + NB - 1) / NB;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || groups < 2 * threads) {
    return RunGroups<M, NB>(w, x, 0, groups, bias, accumulate, relu, y);
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    RunGroups<M, NB>(w, x, groups * t / n, groups * (t + 1) / n, bias, accumulate, relu, y);
  }
}

// 5 to kMaxRows rows: one slab at a time, the rows in groups of kGroup (24 accumulators), the
// inputs in blocks of kBlockK so a block of the slab (16 KB) stays in L1 while every group passes
// over it; the weights kPrefetchAhead floats (128 KB) further on are prefetched into L2 meanwhile.
// The three figures were chosen by BM_SmallRows (7 groups, blocks of 32 or 128 inputs, 32 KB or
// 192 KB ahead and whole slabs at once were slower; without the prefetch the kernel was no
// faster than oneDNN).
constexpr int kGroup = 6;
constexpr int64_t kBlockK = 64;
constexpr int64_t kPrefetchAhead = 128 * 1024 / sizeof(float);

// The partial sums of all rows over inputs [k0, k1) of one slab; the groups' passes also
// prefetch as many lines as they read from the slab, from `pf` on (null: none), spread over the
// first groups.
void RowsPart(const float* ws, int64_t in, int64_t k0, int64_t k1, const float* x, int64_t rows,
              float* part, bool fresh, const char* pf) {
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  const int pf_lines = static_cast<int>((4 + groups - 1) / groups);
  const int64_t lines = (k1 - k0) * 4;
  int64_t done = 0;
  for (int64_t m = 0; m < rows; m += kGroup) {
    const char* p = pf != nullptr && done < lines ? pf + done * 64 : nullptr;
    if (p != nullptr) done += (k1 - k0) * pf_lines;
    const float* xr = x + m * in;
    float* pr = part + m * kSlabCols;
    switch (std::min<int64_t>(rows - m, kGroup)) {
      case 1: GroupRows<1>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
      case 2: GroupRows<2>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
      case 3: GroupRows<3>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
      case 4: GroupRows<4>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
      case 5: GroupRows<5>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
      default: GroupRows<6>(ws, in, k0, k1, xr, pr, fresh, p, pf_lines); break;
    }
  }
}

void RunSlabsMany(const PackedWeights& w, const float* x, int64_t rows, int64_t s0, int64_t s1,
                  const float* bias, bool accumulate, bool relu, float* y) {
  alignas(64) float part[kMaxRows * kSlabCols], sums[kMaxRows * kSlabCols];
  const int64_t end = s1 * w.slab;  // this caller's weights are [s0 * slab, end) of w.data
  for (int64_t s = s0; s < s1; ++s) {
    const float* ws = w.data + s * w.slab;
    for (int64_t c0 = 0; c0 < w.in; c0 += w.chunk) {
      const int64_t c1 = std::min(w.in, c0 + w.chunk);
      for (int64_t k = c0; k < c1; k += kBlockK) {
        const int64_t ahead = s * w.slab + k * kSlabCols + kPrefetchAhead;
        const char* next =
            ahead < end ? reinterpret_cast<const char*>(w.data + ahead) : nullptr;
        RowsPart(ws, w.in, k, std::min(c1, k + kBlockK), x, rows, part, k == c0, next);
      }
      AddInto(part, rows * kSlabCols, c0 == 0, sums);
    }
    FinishSlabs(w, sums, rows, s, 1, bias, accumulate, relu, y);
  }
}

void ForwardMany(const PackedWeights& w, const float* x, int64_t rows, const float* bias,
                 bool accumulate, bool relu, float* y) {
  const int64_t slabs = (w.out + kSlabCols - 1) / kSlabCols;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || slabs < 2 * threads) {
    return RunSlabsMany(w, x, rows, 0, slabs, bias, accumulate, relu, y);
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    RunSlabsMany(w, x, rows, slabs * t / n, slabs * (t + 1) / n, bias, accumulate, relu, y);
  }
}
#endif  // GLOSSA_GEMV_X86

// Deterministic test values in [-scale, scale), of several magnitudes.
void Fill(std::vector<float>& v, uint32_t seed, float scale) {
  uint32_t s = seed;
  for (float& f : v) {
    s = s * 1664525u + 1013904223u;
    const float unit = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
    f = unit * scale * static_cast<float>(1 << ((s >> 4) % 4));
  }
}

// Runs oneDNN's matmul ([rows, in] x [in, out] + bias, post-ops as Linear's) into y.
void OnednnProduct(int64_t rows, const memory& packed, const float* x, const float* bias,
                   bool accumulate, Activation activation, float* y) {
  const memory::desc weights = packed.get_desc();
  const int64_t in = weights.dims()[0], out = weights.dims()[1];
  dnnl::primitive_attr attr;
  attr.set_post_ops(MatmulPostOps(accumulate, activation));
  const memory::desc src({rows, in}, dt::f32, tag::ab), dst({rows, out}, dt::f32, tag::ab);
  const memory::desc bias_desc({1, out}, dt::f32, tag::ab);
  auto desc = bias != nullptr ? dnnl::matmul::desc(src, weights, bias_desc, dst)
                              : dnnl::matmul::desc(src, weights, dst);
  dnnl::matmul matmul(dnnl::matmul::primitive_desc(desc, attr, CpuEngine()));
  memory x_mem(src, CpuEngine(), const_cast<float*>(x)), y_mem(dst, CpuEngine(), y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, packed}, {DNNL_ARG_DST, y_mem}};
  if (bias != nullptr) {
    args[DNNL_ARG_BIAS] = memory(bias_desc, CpuEngine(), const_cast<float*>(bias));
  }
  matmul.execute(ThreadStream(), args);
  ThreadStream().wait();
}

// Tries each chunk length on synthetic weights of `in` inputs; see MatchingChunk.
int64_t ProbeChunk(int64_t in, bool bias, bool accumulate, Activation activation) {
  constexpr int64_t kOut = 4 * kSlabCols + 16;  // several slabs and a partial one
  constexpr int64_t kRows = kMaxRows;           // a batch row count: 1..kMaxRows are checked
  static_assert(kRows >= kMaxRows);
  std::vector<float> plain(in * kOut), x(kRows * in), b(kOut), start(kRows * kOut);
  Fill(plain, 1, 0.05f);
  Fill(x, 2, 1.0f);
  Fill(b, 3, 0.5f);
  Fill(start, 4, 1.0f);
  memory plain_mem({{in, kOut}, dt::f32, tag::ba}, CpuEngine(), plain.data());
  const memory::desc any({in, kOut}, dt::f32, tag::any);
  const memory::desc preferred =
      dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(memory::desc({kRows, in}, dt::f32, tag::ab), any,
                             memory::desc({kRows, kOut}, dt::f32, tag::ab)),
          CpuEngine())
          .weights_desc();
  const int64_t slab = SlabStride(preferred, in);
  if (slab == 0) return 0;
  memory packed(preferred, CpuEngine());
  dnnl::reorder(plain_mem, packed).execute(ThreadStream(), plain_mem, packed);
  ThreadStream().wait();
  const float* bias_data = bias ? b.data() : nullptr;
  std::vector<float> batch = start, single = start;
  OnednnProduct(kRows, packed, x.data(), bias_data, accumulate, activation, batch.data());
  OnednnProduct(1, packed, x.data(), bias_data, accumulate, activation, single.data());
  if (std::memcmp(batch.data(), single.data(), kOut * sizeof(float)) != 0) return 0;
  for (int64_t chunk : {in, int64_t{1024}, int64_t{512}, int64_t{256}, int64_t{128}}) {
    if (chunk > in || (chunk != in && chunk % kBlockIn != 0)) continue;
    const PackedWeights w{static_cast<const float*>(packed.get_data_handle()), in, kOut, slab,
                          chunk};
    bool same = true;
    for (int64_t rows = 1; rows <= kMaxRows && same; ++rows) {
      std::vector<float> y = start;
      Forward(w, x.data(), rows, bias_data, accumulate, activation, y.data());
      same = std::memcmp(y.data(), batch.data(), rows * kOut * sizeof(float)) == 0;
    }
    if (same) return chunk;
  }
  return 0;
}

}  // namespace

namespace {
thread_local int streaming_scopes = 0;
}  // namespace

StreamingScope::StreamingScope() { ++streaming_scopes; }
StreamingScope::~StreamingScope() { --streaming_scopes; }

int64_t RowLimit() { return streaming_scopes > 0 ? kMaxRows : kMaxCachedRows; }

int64_t SlabStride(const memory::desc& packed, int64_t in) {
  const dnnl_memory_desc_t& d = packed.data;
  if (d.ndims != 2 || d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked) return 0;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (b.inner_nblks != 2 || b.inner_blks[0] != kBlockIn || b.inner_idxs[0] != 0 ||
      b.inner_blks[1] != kSlabCols || b.inner_idxs[1] != 1) {
    return 0;
  }
  const int64_t padded_in = (in + kBlockIn - 1) / kBlockIn * kBlockIn;
  if (d.padded_dims[0] != padded_in || b.strides[0] != kBlockIn * kSlabCols ||
      b.strides[1] != padded_in * kSlabCols || d.offset0 != 0) {
    return 0;
  }
  return b.strides[1];
}

#if GLOSSA_GEMV_X86
#pragma GCC diagnostic push
// GCC 12's casts and shuffles start from _mm512_undefined_*, which it then reports.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
__attribute__((target("avx512f"), always_inline)) inline __m512 Low64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
__attribute__((target("avx512f"), always_inline)) inline __m512 High64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// A 16 x 16 tile: rows r[c] (16 inputs each) in, columns out (r[i] holds input i of the 16 rows).
__attribute__((target("avx512f"), always_inline)) inline void Transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    r[4 * k] = Low64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 1] = High64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 2] = Low64(t[4 * k + 1], t[4 * k + 3]);
    r[4 * k + 3] = High64(t[4 * k + 1], t[4 * k + 3]);
  }
  // r[4k + j] now holds, per 128-bit lane L, input 4L + j of rows 4k .. 4k + 3.
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 4; ++j) {
      t[8 * k + j] = _mm512_shuffle_f32x4(r[8 * k + j], r[8 * k + 4 + j], 0x88);
      t[8 * k + 4 + j] = _mm512_shuffle_f32x4(r[8 * k + j], r[8 * k + 4 + j], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

__attribute__((target("avx512f"))) void PlainToSlabAvx512(const float* plain, int64_t in,
                                                          int64_t cols, float* slab) {
  const int64_t padded_in = (in + kBlockIn - 1) / kBlockIn * kBlockIn;
  for (int64_t c0 = 0; c0 < kSlabCols; c0 += 16) {
    for (int64_t i0 = 0; i0 < padded_in; i0 += 16) {
      const __mmask16 mask = avx512::LaneMask(std::min<int64_t>(16, in - i0));
      __m512 r[16];
      for (int c = 0; c < 16; ++c) {
        r[c] = c0 + c < cols ? _mm512_maskz_loadu_ps(mask, plain + (c0 + c) * in + i0)
                             : _mm512_setzero_ps();
      }
      Transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(slab + (i0 + i) * kSlabCols + c0, r[i]);
    }
  }
}
}  // namespace
#pragma GCC diagnostic pop
#endif

void PlainToSlab(const float* plain, int64_t in, int64_t cols, float* slab) {
#if GLOSSA_GEMV_X86
  if (ops::internal::CpuHasAvx512F()) return PlainToSlabAvx512(plain, in, cols, slab);
#endif
  const int64_t padded_in = (in + kBlockIn - 1) / kBlockIn * kBlockIn;
  std::fill(slab, slab + padded_in * kSlabCols, 0.0f);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t i = 0; i < in; ++i) slab[i * kSlabCols + c] = plain[c * in + i];
  }
}

namespace internal {
std::atomic<bool>& EnabledFlag() {
  static std::atomic<bool> enabled{true};
  return enabled;
}
bool Enabled() {
  return EnabledFlag().load(std::memory_order_relaxed) && ops::internal::CpuHasAvx512F();
}
void SetEnabled(bool enabled) { EnabledFlag().store(enabled, std::memory_order_relaxed); }
}  // namespace internal

int64_t MatchingChunk(int64_t in, bool bias, bool accumulate, Activation activation) {
  if (!ops::internal::CpuHasAvx512F()) return 0;
  using Key = std::tuple<int64_t, bool, bool, int, int>;
  static absl::Mutex mu(absl::kConstInit);
  static auto* known = new absl::flat_hash_map<Key, int64_t>();
  const Key key{in, bias, accumulate, static_cast<int>(activation), omp_get_max_threads()};
  absl::MutexLock lock(&mu);
  auto it = known->find(key);
  if (it != known->end()) return it->second;
  int64_t chunk = 0;
  try {
    chunk = ProbeChunk(in, bias, accumulate, activation);
  } catch (const dnnl::error&) {
    chunk = 0;
  }
  known->emplace(key, chunk);
  return chunk;
}

void Forward(const PackedWeights& w, const float* x, int64_t rows, const float* bias,
             bool accumulate, Activation activation, float* y) {
#if GLOSSA_GEMV_X86
  const bool relu = activation == Activation::kRelu;
  switch (rows) {
    case 1:
      ForwardRows<1, 4>(w, x, bias, accumulate, relu, y);
      break;
    case 2:
      ForwardRows<2, 3>(w, x, bias, accumulate, relu, y);
      break;
    case 3:
      ForwardRows<3, 2>(w, x, bias, accumulate, relu, y);
      break;
    case 4:
      ForwardRows<4, 3>(w, x, bias, accumulate, relu, y);
      break;
    default:
      ForwardMany(w, x, rows, bias, accumulate, relu, y);
      break;
  }
  if (activation != Activation::kNone && !relu) ApplyEltwise(activation, y, rows * w.out);
#else
  (void)w, (void)x, (void)rows, (void)bias, (void)accumulate, (void)activation, (void)y;
#endif
}

}  // namespace glossa::gemv
