// A fully connected layer over oneDNN: y = act(x · Wᵀ + b) [+ y].
//
// Weights: the model file holds them in PyTorch layout [out, in] (memory-mapped while it loads).
// At construction they are reordered once into the blocked layout that oneDNN's brgemm matmul
// prefers (the one it picks for `format_tag::any`), in an owned, aligned buffer. Used in place
// through the {in, out}:ba view, brgemm instead repacks the weights on every call, which made
// small-row matmuls 2.5-3x slower (see tests/bench/linear_bench.cc). Should oneDNN ever pick
// another layout for some row count, that primitive falls back to the plain [out, in] weights:
// the caller's, which is why they must still outlive the Linear, or, with copy_plain (see the
// constructor), a copy made back from the packed one. A Linear made with Packing::kDeferred (see
// there) packs later, when first needed.
//
// Rows: a call runs as ceil(rows / P) pieces of near-equal size, P = kSmallPieceRows (64), or
// kMaxPieceRows (256) for weights over kLargeWeightBytes (the output projection). Primitives
// therefore exist only for 1..P rows (and both values of `accumulate`), created on first use, so
// their number and their JIT code stay bounded however many row counts the decoder and encoder
// produce: exact primitives for every row count up to 256 cost 12 MB more peak RSS in
// beam 4 x batch 32. Small weights stay in L2 and pieces cost nothing (measured); large ones
// stream from L3 or DRAM once per piece, hence the larger pieces. Splitting does not change any
// row's result.
//
// Compute types: float32 (the weights as given), bfloat16 (weights and, per call, the input
// rounded to bf16; f32 accumulation, output, bias and post-ops: oneDNN's AVX512-BF16 kernels) and
// int8 / int8_fast (weights s8 per output row with f32 scales, the input quantized per row to u8
// on every call — int8 adds a second u8 code for the rounding residual, as extra matmul rows — an
// s32 matmul on VNNI, then our own epilogue for scales, bias, activation and accumulation; see
// ops/quantize.h for the number formats). int8 splits calls into pieces of half the rows, so
// that its matmuls (twice the rows) stay within the same primitive sizes. Weights may arrive in
// any of the three storage types and are converted once at construction into an owned buffer
// when their type differs from the compute type. Converted from float32 (a float32 model file
// loaded as int8, int8_fast or bfloat16), they are converted in slices of output rows, each
// slice of the caller's float32 weights handed to PackedSliceDone once converted, so that a
// mapped file drops its pages at once; and once packed, the converted plain copy is freed (a
// primitive that wants the plain layout gets a copy made back from the packed one), so that a
// load holds at most one matrix's converted copy besides the packed weights.
//
// Threads: oneDNN fixes a primitive's OpenMP thread count when it is created, i.e. by the first
// call of each row count, so every caller of one Linear should run with the same team size
// (omp_get_max_threads): a Linear first used by a 1-thread caller stays 1 thread.
//
// Few rows: float32 pieces of 1 to gemv::RowLimit() rows (32; 64 in decoder steps) run
// ops/gemv.h's kernel over the same packed weights, which streams them faster and gives the
// same bits as oneDNN.
//
// Thread safety: Forward may be called concurrently from any number of threads, on the same Linear
// too. Primitive lookup is a lock-free atomic load; creation takes a mutex once per
// (rows, accumulate). Primitives use a user-managed scratchpad, one buffer per thread: with
// oneDNN 2.6's default library scratchpad a primitive must not run on two threads at once, and
// doing so gave wrong results. The oneDNN memory objects that wrap x, y and the scratchpad are
// per-thread too (thread_local, keyed by shape) and only have their data handle set per call, so
// a call allocates nothing once warm.
#ifndef GLOSSA_RUNTIME_OPS_LINEAR_H_
#define GLOSSA_RUNTIME_OPS_LINEAR_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "ops/ops.h"

namespace glossa {

enum class Activation { kNone, kRelu, kSwish, kGelu, kGeluTanh };

// int8 and int8_fast share the weights (s8 per output row); int8 carries each activation as two
// u8 codes (about 16 bits; a matmul of twice the rows), int8_fast as one (8 bits). See
// ops/quantize.h.
enum class ComputeType { kFloat32, kBFloat16, kInt8, kInt8Fast };
const char* ComputeTypeName(ComputeType type);
// "float32", "bfloat16", "int8" or "int8_fast"; false for anything else.
bool ParseComputeType(const std::string& name, ComputeType* type);
// The compute types in the order above, joined by ", " (for messages and --help).
const char* ComputeTypeNames();
inline bool IsInt8(ComputeType type) {
  return type == ComputeType::kInt8 || type == ComputeType::kInt8Fast;
}

// A weight matrix [out, in], row-major, in one storage type: set f32, bf16 (raw bit patterns) or
// s8 together with s8_scales ([out]: w = s8 * scale).
struct LinearWeights {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
  const int8_t* s8 = nullptr;
  const float* s8_scales = nullptr;
};

class Linear {
 public:
  // Most rows one primitive is made for; larger calls are split (see above).
  static constexpr int64_t kSmallPieceRows = 64;
  static constexpr int64_t kMaxPieceRows = 256;
  static constexpr int64_t kLargeWeightBytes = int64_t{4} << 20;

  // weight: [out, in] row-major; bias: [out] or nullptr. Both must outlive the Linear.
  Linear(const float* weight, const float* bias, int64_t in, int64_t out,
         Activation activation = Activation::kNone)
      : Linear(LinearWeights{weight}, bias, in, out, activation, ComputeType::kFloat32) {}
  // Called while the weights are copied into oneDNN's layout or converted to the compute type,
  // with each range of the caller's weights (output rows, at most ~kPackSliceBytes) once it is
  // copied or converted: a caller whose weights are a mapped file can drop those pages at once,
  // so that a large matrix (NLLB's 1 GB output projection) is never in memory twice.
  using PackedSliceDone = std::function<void(const void* plain, size_t bytes)>;
  static constexpr int64_t kPackSliceBytes = int64_t{16} << 20;

  // When the packed copy is made. kDeferred (float32 weights used in place, no activation; the
  // output projection with an ops/argmax_screen.h screen): not before EnsurePacked() or a product
  // that needs it. Until then products of up to gemv::kMaxRows rows without accumulation copy
  // each 64-column slab they need from the caller's weights into a per-thread buffer in the
  // packed layout and run ops/gemv.h's kernel on it (Float32Slab): the same bits as the packed
  // copy gives, without holding it. A greedy-only process then keeps NLLB-600M's 1 GB output
  // projection in the model file (the screen reads its int8 copy; only candidates' slabs are
  // read in float32), and packs it when a step first needs every logit (beam search, scores).
  enum class Packing { kNow, kDeferred };

  // Throws dnnl::error when oneDNN has no kernel for `compute` on this CPU. `copy_plain`: how the
  // Linear reads the caller's weights once the constructor is done (a model file that may be
  // overwritten while it serves: ModelFile::CopyOut); empty: in place. With it, the caller's
  // weights are read in place only by the constructor: a deferred Linear copies each slab it
  // reads (ForwardColumns, the screen's build, products over every column) and each slice it
  // packs through it; a packed Linear that wants the plain layout for some row count makes it
  // back from its packed copy; one never packed (tiny shapes) keeps a copy of its own.
  Linear(const LinearWeights& weights, const float* bias, int64_t in, int64_t out,
         Activation activation, ComputeType compute, const PackedSliceDone& packed_slice = {},
         Packing packing = Packing::kNow, ops::StoredCopy copy_plain = {});
  Linear(Linear&&) noexcept;
  ~Linear();

  int64_t in() const { return in_; }
  ComputeType compute_type() const { return compute_; }
  int64_t out() const { return out_; }
  // The weights the products read: the packed copy where there is one, else the caller's.
  // For diagnostics (glossa-peer-run times a read of them).
  struct Span {
    const void* data;
    size_t bytes;
  };
  Span WeightSpan() const;
  // The plain weights [out, in] in the compute type's storage (s8 for the int8 types), as
  // primitives that want the plain layout read them: the caller's, the converted copy, or one made
  // back from the packed copy where the converted one was freed. For tests.
  const void* PlainWeights() const;

  // y[rows, out] = act(x[rows, in] · Wᵀ + b). With accumulate, y += x · Wᵀ + b (the activation is
  // not allowed then). x and y are dense row-major.
  void Forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  // The product of Forward without accumulation, handed out in blocks of kColumnBlock output
  // columns: each block of a piece of rows goes to done(first_row, rows, first_col, cols, block,
  // stride) while it is in cache (block[r * stride + c] is y[first_row + r, first_col + c]), the
  // blocks of a piece in column order, the pieces in row order. The output projection's logits
  // are 128 x 15,315 floats (7.8 MB) in beam 4 batch 32: the search's passes over them then read
  // L2, and rows it needs no more of are never written to memory. Each block is its own oneDNN
  // matmul over that block of the packed weights, into a per-thread buffer of
  // rows x kColumnBlock (oneDNN 2.6's brgemm takes no strided output; with one it picks gemm:jit
  // and the plain weights); pieces of up to gemv::RowLimit() rows run ops/gemv.h's kernel on each
  // block. The int8 compute types quantize the piece's input once, then run each block's s32
  // matmul and their epilogue into that buffer (pieces of at least kInt8BlockMinRows rows; their
  // s32 sums would otherwise go to memory and be read back twice). This applies to float32 and
  // int8 with the packed layout, no activation and one OpenMP thread; otherwise (bfloat16, or
  // fewer int8 rows) Forward writes the whole product into y and the blocks are views of y. So
  // y [rows, out] is working space: what done does not copy out of a block may or may not be
  // there afterwards. The blocks hold Forward's bits (ops_test checks).
  static constexpr int64_t kColumnBlock = 1024;
  static constexpr int64_t kInt8BlockMinRows = 16;
  using BlockDone = absl::FunctionRef<void(int64_t first_row, int64_t rows, int64_t first_col,
                                           int64_t cols, const float* block, int64_t stride)>;
  void ForwardInColumnBlocks(const float* x, int64_t rows, float* y, BlockDone done) const;

  // For ops/argmax_screen.h: the float32 weights' 64-column slabs in ops/gemv.h's layout (packed
  // now or deferred) and the bias (null without one); slab_stride is 0 where ForwardColumns can
  // never run (it may still decline at run time, where ops/gemv.h's kernel does not reproduce
  // oneDNN's sums).
  struct Float32Slabs {
    int64_t slab_stride = 0;  // gemv::SlabStride: floats per slab
    const float* bias = nullptr;
  };
  Float32Slabs Float32SlabLayout() const;
  // Slab s (columns [64 s, 64 s + 64)) of the packed float32 weights: in the packed copy, or,
  // while packing is deferred, copied from the caller's weights into `scratch` (slab_stride
  // floats; columns past out() zero; 64-byte aligned where handed to ops/gemv.h's kernel,
  // which loads it aligned). Only where Float32SlabLayout().slab_stride is not 0.
  const float* Float32Slab(int64_t s, float* scratch) const;
  // While packing is deferred and the caller's weights are read in place (no copy_plain): hands
  // columns [first, first + cols) of them to the constructor's packed_slice callback (a mapped
  // file drops those pages); else nothing.
  void ReleasePlainColumns(int64_t first, int64_t cols) const;
  // Columns [first, first + cols) of Forward(x, rows) (no accumulation), bit for bit, through
  // ops/gemv.h's kernel, into y [rows, cols]; first a multiple of gemv::kSlabCols, rows at most
  // gemv::kMaxRows. False (nothing done) where that kernel does not reproduce Forward here.
  bool ForwardColumns(const float* x, int64_t rows, int64_t first, int64_t cols, float* y) const;

  // Makes the packed copy now if packing was deferred (once; thread-safe; waits for a copy
  // StartPacking began); else nothing.
  void EnsurePacked() const;
  // Begins making the packed copy on a thread of its own if packing was deferred, and returns
  // at once: products run from the plain weights meanwhile (those that cannot wait for it).
  // The first step that needs every logit thus does not wait for NLLB-600M's 1 GB copy.
  void StartPacking() const;

  // True when the weights are in oneDNN's blocked layout (false: the plain view is used for
  // every row count, or packing is deferred and has not happened). For tests and benchmarks.
  bool packed() const { return packed_.load(std::memory_order_acquire); }
  bool packing_deferred() const { return deferred_ && !packed(); }

 private:
  struct Primitive;
  const Primitive& GetPrimitive(int64_t rows, bool accumulate) const;
  static size_t Slot(int64_t rows, bool accumulate) {
    return static_cast<size_t>(rows - 1) * 2 + (accumulate ? 1 : 0);
  }

  void PrepareWeights(const LinearWeights& weights);
  // Runs convert(first, rows) over the output rows in slices of ~kPackSliceBytes of float32
  // weights; with `report`, hands each slice of f32 (the caller's weights) to packed_slice_
  // once converted, and the whole range at the end (pages straddling two slices).
  void ConvertInSlices(const float* f32, bool report,
                       absl::FunctionRef<void(int64_t first, int64_t rows)> convert);
  // Once packed: frees own_s8_ / own_bf16_, and lets go of the caller's weights where they are
  // read through copy_plain_ (plain_weight_mem_ then has no data until RestorePlain).
  void ReleasePlain();
  // Makes plain_copy_ from the packed weights for plain_weight_mem_ if ReleasePlain (or a
  // deferred Pack) let go of its data (once; under create_mu_).
  void RestorePlain() const;
  // Makes packed_weight_mem_ (layout packed_desc_) from the caller's weights, reporting slices
  // to packed_slice_, and sets packed_. Under create_mu_ once constructed. A deferred Linear
  // with copy_plain_ reads them through it and then lets go of them, as ReleasePlain.
  void Pack() const;
  // Columns [first, first + cols) of a float32 product from the caller's weights, slab by slab
  // (Float32Slab), into y with row stride y_stride; with `release`, the weights' pages are
  // released (ReleasePlainColumns) every kColumnBlock columns. False (nothing done) where
  // ops/gemv.h's kernel does not reproduce Forward.
  bool ForwardFromPlain(const float* x, int64_t rows, int64_t first, int64_t cols, float* y,
                        int64_t y_stride, bool release) const;
  // Copies the plain weights into packed_weight_mem_ in slices of output rows, reporting each
  // (with `copy`: each slice's rows copied out through copy_plain_ first, none reported);
  // false when oneDNN cannot address such a slice of the packed layout (nothing reported then
  // is wrong, but the copy must be made whole).
  bool PackInSlices(bool copy) const;
  // The caller's weights are the plain ones and are read only through copy_plain_ once the
  // constructor is done.
  bool ReadsCallersThroughCopy() const { return callers_ != nullptr && copy_plain_ != nullptr; }
  void ForwardPiece(const float* x, int64_t rows, float* y, bool accumulate) const;
  void ForwardInt8Piece(const float* x, int64_t rows, float* y, bool accumulate) const;
  // float32 calls of at most gemv::RowLimit() rows, through ops/gemv.h where it reproduces oneDNN's
  // sums on this machine; false (nothing done) otherwise.
  bool ForwardSmallRows(const float* x, int64_t rows, float* y, bool accumulate) const;
  // gemv::MatchingChunk for these weights (found on first use), 0 where the kernel is not used.
  int64_t GemvChunk(bool accumulate) const;
  void RunMatmul(const Primitive& p, const void* src, int64_t rows, void* dst) const;
  // The same with the given weights and bias (null: none) into dst [rows, cols].
  void RunMatmul(const Primitive& p, const void* src, int64_t rows, void* dst,
                 dnnl_memory_t weights, dnnl_memory_t bias, int64_t cols) const;
  // The matmul of one column block for `rows` rows (the last block when `last`), writing y with
  // row stride out_; null when oneDNN wants another weight layout for it than the packed one.
  const Primitive* GetBlockPrimitive(int64_t rows, bool last) const;
  // Runs block b's matmul (p: GetBlockPrimitive's for `rows` matmul rows) from src into dst
  // [rows, that block's columns].
  void RunBlockMatmul(const Primitive& p, int64_t b, const void* src, int64_t rows,
                      void* dst) const;
  // One piece of ForwardInColumnBlocks in blocks; false (nothing done) when a block's primitive
  // is unavailable.
  bool ForwardPieceInBlocks(const float* x, int64_t rows, int64_t first_row, BlockDone done) const;
  // The int8 compute types' ForwardPieceInBlocks: the input quantized once, then per block the s32
  // matmul and the epilogue, into a per-thread block of rows x kColumnBlock; false (nothing done)
  // below kInt8BlockMinRows rows or when a block's primitive is unavailable.
  bool ForwardInt8PieceInBlocks(const float* x, int64_t rows, int64_t first_row,
                                BlockDone done) const;

  int64_t in_;
  int64_t out_;
  Activation activation_;
  ComputeType compute_;
  // Weights converted to the compute type, when the caller's are of another type.
  std::vector<float> own_f32_;
  std::vector<uint16_t> own_bf16_;
  std::vector<int8_t> own_s8_;
  // The plain weights made back from the packed copy after ReleasePlain, when a primitive wants
  // them (RestorePlain), or, never packed, a copy of the caller's read through copy_plain_;
  // plain_released_: plain_weight_mem_'s data was let go of.
  mutable std::vector<uint8_t> plain_copy_;
  mutable bool plain_released_ = false;
  // The caller's weights, where the compute type uses them as they are (null otherwise).
  const void* callers_ = nullptr;
  // int8 only: per-output-row weight scales, the sums of each output row's s8 weights (to take the
  // input's zero point back out), and the bias, applied in our epilogue rather than by oneDNN.
  std::vector<float> scales_;
  std::vector<int32_t> col_sums_;
  const float* bias_ = nullptr;
  mutable std::atomic<bool> packed_{false};
  mutable std::atomic<bool> packing_started_{false};
  mutable std::thread packer_;  // StartPacking's; joined by the destructor
  bool deferred_ = false;  // Packing::kDeferred was asked for and applies
  dnnl::memory::desc packed_desc_;  // oneDNN's preferred layout, when it differs from the plain
  PackedSliceDone packed_slice_;
  ops::StoredCopy copy_plain_;
  int64_t piece_rows_;  // kSmallPieceRows or kMaxPieceRows
  int64_t slab_stride_ = 0;  // gemv::SlabStride of the packed float32 weights (0: not usable)
  // gemv::MatchingChunk per value of `accumulate`, found on first use; -1 before.
  mutable std::array<std::atomic<int64_t>, 2> gemv_chunk_{-1, -1};
  dnnl::memory plain_weight_mem_;   // {in, out}:ba view of the caller's [out, in] weights
  mutable dnnl::memory packed_weight_mem_;  // owned blocked copy; empty when !packed_
  dnnl::memory bias_mem_;
  mutable absl::Mutex create_mu_;  // serialises primitive creation and deferred packing
  // Slot(rows, accumulate) -> primitive, or null before first use. Owned; deleted by ~Linear.
  mutable std::array<std::atomic<Primitive*>, 2 * kMaxPieceRows> primitives_{};
  // ForwardInColumnBlocks: Slot(rows, last block) -> primitive (a null Primitive::matmul when
  // unavailable), and each block's weights and bias as oneDNN memory objects over the packed
  // copy, made with the first block primitive.
  mutable std::array<std::atomic<Primitive*>, 2 * kMaxPieceRows> block_primitives_{};
  mutable std::vector<dnnl::memory> block_weights_, block_bias_;
};

// oneDNN's eltwise algorithm for an activation other than kNone, with its alpha, and the
// post-ops of a float32/bfloat16 Linear's matmul: y += (with accumulate), then the activation.
dnnl::algorithm EltwiseAlgorithm(Activation activation);
float EltwiseAlpha(Activation activation);
dnnl::post_ops MatmulPostOps(bool accumulate, Activation activation);

// The process-wide CPU engine and this thread's stream.
dnnl::engine& CpuEngine();
dnnl::stream& ThreadStream();

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_OPS_LINEAR_H_
