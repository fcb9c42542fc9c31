// A fully connected layer over oneDNN: y = act(x · Wᵀ + b) [+ y].
//
// Weights stay where the model file put them (PyTorch layout [out, in], memory-mapped); oneDNN
// reads them as the transposed view {in, out}:ba, so nothing is copied at load. One matmul
// primitive is created per (rows, accumulate) pair on first use and reused afterwards.
#ifndef GLOSSA_RUNTIME_OPS_LINEAR_H_
#define GLOSSA_RUNTIME_OPS_LINEAR_H_

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace glossa {

enum class Activation { kNone, kRelu, kSwish, kGelu, kGeluTanh };

class Linear {
 public:
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

 private:
  struct Primitive;
  const Primitive& GetPrimitive(int64_t rows, bool accumulate) const;

  int64_t in_;
  int64_t out_;
  Activation activation_;
  dnnl::memory weight_mem_;
  dnnl::memory bias_mem_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<int64_t, std::unique_ptr<Primitive>> primitives_ ABSL_GUARDED_BY(mu_);
};

// The process-wide CPU engine and this thread's stream.
dnnl::engine& CpuEngine();
dnnl::stream& ThreadStream();

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_OPS_LINEAR_H_
