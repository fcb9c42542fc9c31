// The exact argmax of a few rows of a large float32 Linear (the output projection, for greedy
// search when no score is wanted) without reading its float32 weights in full.
//
// Why: at batch 1 a decoder step reads every weight once, and the output projection is most of
// them (NLLB-600M: 1.05 GB of 1.72 GB per token; OPUS-MT big: 249 of 602 MB). Greedy search
// without scores needs only the index of each row's largest logit, not the logits.
//
// How: an int8 copy of the weights (per output column j: q_ij = round(w_ij / s_j), s_j =
// max_i |w_ij| / 127, the largest residual d_j = max_i |w_ij - s_j q_ij| measured exactly at
// construction) and each row x as u8 codes (x_i ~ sx (u_i - 128), sx = max|x| / 127) give every
// logit approximately, a_j = sx s_j (u - 128) . q_j + b_j, from an integer dot product (AVX-512
// VNNI: 64 multiply-adds per instruction, a quarter of the float32 weights' bytes). The float32
// logit the Linear computes, k_j, is within E_j of a_j:
//   |k_j - a_j| <= |x|_1 d_j  +  (sx / 2) s_j |q_j|_1  +  roundings (of the Linear's float sum
//   and of the screen's scaling),
// which the screen bounds from above (with margins for its own comparisons; the derivation is
// at ArgMaxScreen::Quantize). With M the largest a_j - E_j, no id whose a_j + E_j is below M can
// hold the maximum of k, so only the others (the candidates: typically 1 to 2 of a vocabulary)
// are computed in float32, by the Linear's own kernel over their 64-column slabs
// (Linear::ForwardColumns): the same bits as Forward. Their largest value, lowest id first, is
// Forward's argmax. Where the screen cannot tell (non-finite values, too many candidates, every
// id excluded) it says so and the caller computes the logits.
//
// Rows: 1 to kMaxRows (64, ops/gemv.h's most), in groups of 6 over each 64-column slab of codes
// while it is in cache: at batch 32 the int8 products cost a fraction of the float32 ones.
//
// Memory: one byte per weight plus five numbers per column (NLLB-600M: 253 MB beside the 1 GB
// float32 copy), and per thread rows x vocabulary floats of approximate logits. Built only for
// float32 Linears that ops/gemv.h's kernel serves, on CPUs with AVX-512 VNNI; the model's is
// built on first use (LazyArgMaxScreen).
#ifndef GLOSSA_RUNTIME_OPS_ARGMAX_SCREEN_H_
#define GLOSSA_RUNTIME_OPS_ARGMAX_SCREEN_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/linear.h"

namespace glossa {

class ArgMaxScreen {
 public:
  static constexpr int64_t kMaxRows = 64;
  static constexpr int kMaxCandidates = 512;  // per row; more: undecided

  // Null where the screen cannot stand for `linear`: not float32 with packed (or deferred)
  // weights that Linear::ForwardColumns computes, an activation, non-finite weights or bias, or
  // not Supported().
  // `linear` must outlive the screen.
  static std::unique_ptr<ArgMaxScreen> Build(const Linear& linear);

  // Whether this CPU runs screens (x86 with AVX-512F and AVX-512 VNNI).
  static bool Supported();

  // Bytes the screen holds (its int8 weights and per-column figures).
  int64_t bytes() const;
  // Its int8 weights, which every call reads (glossa-peer-run times a read of them).
  Linear::Span codes() const { return {q_.data(), q_.size()}; }

  // For each row r < rows (<= kMaxRows) of x [rows, in]: the lowest id of the largest value of
  // row r of linear.Forward(x) over the ids not in excluded[offsets[r] .. offsets[r + 1]), and
  // that value, bit for bit, into index[r] and value[r]. False when it cannot tell for some row
  // (the outputs are then unspecified). Uses the caller's OpenMP team size.
  bool ArgMax(const float* x, int64_t rows, const int* excluded, const int* offsets, int64_t* index,
              float* value) const;

  // Rows decided and candidates computed in float32 over every screen's calls so far, in this
  // process (for benchmarks and tests).
  struct Counts {
    int64_t rows = 0;
    int64_t candidates = 0;
  };
  static Counts ProcessCounts();

 private:
  explicit ArgMaxScreen(const Linear& linear);
  bool Quantize(int64_t slab_stride, const float* bias);
  // Row x's u8 codes into codes [in rounded up to 4], its step sx and max |x|; false for a
  // non-finite input (or a subnormal step).
  bool QuantizeRow(const float* x, uint8_t* codes, float* sx, float* max_abs) const;
  // The approximate logits of `rows` rows (their codes and steps) into approx [rows][padded].
  void Approximate(const uint8_t* codes, const float* row_scale, int64_t rows,
                   float* approx) const;
  // Row x's candidates (ascending ids) given its approximate logits (excluded ids -inf); false
  // when undecidable.
  bool Candidates(const float* x, float sx, float max_abs, const float* approx,
                  std::vector<int>* ids) const;

  const Linear& linear_;
  int64_t in_, out_, slabs_;
  // [slabs][in / 4][64][4]: per 64-column slab (ops/gemv.h's), four inputs' codes per column
  // together, as VNNI's dot products take them.
  std::vector<int8_t> q_;
  std::vector<float> scale_;       // [slabs * 64] s_j (0 past out)
  std::vector<float> bias_;        // [slabs * 64] b_j (0 without a bias)
  std::vector<int32_t> zero_sums_;  // [slabs * 64] 128 sum_i q_ij
  // [slabs * 64] E_j = |x|_1 per_norm_[j] + code per_code_[j] + fixed_ (code: the row's).
  std::vector<float> per_norm_, per_code_;
  float fixed_ = 0.0f;
  // Set once Linear::ForwardColumns declines (ops/gemv.h's kernel does not reproduce this
  // Linear's sums here): every later call says undecided at once.
  mutable std::atomic<bool> declined_{false};
};

// A screen built on first use, so that a process that never decodes greedy without scores (beam
// search only, or scores always asked for) never holds one. Get() builds it once, on whichever
// thread asks first (the others wait): OPUS-MT base ~0.1 s, big ~0.3 s, NLLB-600M ~0.8 s.
class LazyArgMaxScreen {
 public:
  // The Linear must outlive this.
  explicit LazyArgMaxScreen(const Linear& linear) : linear_(linear) {}
  // The screen (ArgMaxScreen::Build's; null where it cannot be built), built on the first call.
  const ArgMaxScreen* Get() const;
  // The screen when built, else null; never builds.
  const ArgMaxScreen* IfBuilt() const;

 private:
  const Linear& linear_;
  // std::call_once (pthread_once): ThreadSanitizer sees its ordering, which it cannot see in
  // Debian's uninstrumented absl::call_once when a second thread waits for the first.
  mutable std::once_flag once_;
  mutable std::unique_ptr<ArgMaxScreen> screen_;
  mutable std::atomic<bool> built_{false};
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_OPS_ARGMAX_SCREEN_H_
