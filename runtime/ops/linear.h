// A fully connected layer over oneDNN: y = act(x · Wᵀ + b) [+ y].
//
// Weights: the model file holds them in PyTorch layout [out, in] (memory-mapped). At construction
// they are reordered once into the blocked layout that oneDNN's brgemm matmul prefers (the one it
// picks for `format_tag::any`), in an owned, aligned buffer. Used in place through the
// {in, out}:ba view, brgemm instead repacks the weights on every call, which made small-row matmuls
// 2.5-3x slower (see tests/bench/linear_bench.cc). Should oneDNN ever pick another layout for some
// row count, that primitive falls back to the caller's [out, in] weights, which is why they must
// still outlive the Linear.
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

#include "absl/synchronization/mutex.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace glossa {

enum class Activation { kNone, kRelu, kSwish, kGelu, kGeluTanh };

class Linear {
 public:
  // Most rows one primitive is made for; larger calls are split (see above).
  static constexpr int64_t kSmallPieceRows = 64;
  static constexpr int64_t kMaxPieceRows = 256;
  static constexpr int64_t kLargeWeightBytes = int64_t{4} << 20;

  // weight: [out, in] row-major; bias: [out] or nullptr. Both must outlive the Linear.
  Linear(const float* weight, const float* bias, int64_t in, int64_t out,
         Activation activation = Activation::kNone);
  Linear(Linear&&) noexcept;
  ~Linear();

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

  // y[rows, out] = act(x[rows, in] · Wᵀ + b). With accumulate, y += x · Wᵀ + b (the activation is
  // not allowed then). x and y are dense row-major.
  void Forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  // True when the weights were reordered into oneDNN's blocked layout (false: the plain view is
  // used for every row count). For tests and benchmarks.
  bool packed() const { return packed_; }

 private:
  struct Primitive;
  const Primitive& GetPrimitive(int64_t rows, bool accumulate) const;
  static size_t Slot(int64_t rows, bool accumulate) {
    return static_cast<size_t>(rows - 1) * 2 + (accumulate ? 1 : 0);
  }

  int64_t in_;
  int64_t out_;
  Activation activation_;
  bool packed_ = false;
  int64_t piece_rows_;  // kSmallPieceRows or kMaxPieceRows
  dnnl::memory plain_weight_mem_;   // {in, out}:ba view of the caller's [out, in] weights
  dnnl::memory packed_weight_mem_;  // owned blocked copy; empty when !packed_
  dnnl::memory bias_mem_;
  mutable absl::Mutex create_mu_;  // serialises primitive creation only
  // Slot(rows, accumulate) -> primitive, or null before first use. Owned; deleted by ~Linear.
  mutable std::array<std::atomic<Primitive*>, 2 * kMaxPieceRows> primitives_{};
};

// The process-wide CPU engine and this thread's stream.
dnnl::engine& CpuEngine();
dnnl::stream& ThreadStream();

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_OPS_LINEAR_H_
