#include "ops/linear.h"

#include <omp.h>

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace glossa {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Row count used to ask oneDNN for its preferred weight layout. The brgemm matmul picks the
// layout from K and N only (checked for 1..256 rows on every shape of the demo model), and every
// primitive is checked against it anyway.
constexpr int64_t kRepresentativeRows = 32;

dnnl::algorithm EltwiseAlgorithm(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kSwish:
      return dnnl::algorithm::eltwise_swish;
    case Activation::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::kNone:
      break;
  }
  return dnnl::algorithm::undef;
}

memory::desc RowMajor(int64_t rows, int64_t cols) {
  return memory::desc({rows, cols}, dt::f32, tag::ab);
}

dnnl::matmul::primitive_desc MatmulPd(int64_t rows, int64_t in, int64_t out,
                                      const memory::desc& weights, const dnnl::memory& bias,
                                      const dnnl::primitive_attr& attr) {
  const memory::desc src = RowMajor(rows, in), dst = RowMajor(rows, out);
  auto desc = bias ? dnnl::matmul::desc(src, weights, bias.get_desc(), dst)
                   : dnnl::matmul::desc(src, weights, dst);
  return dnnl::matmul::primitive_desc(desc, attr, CpuEngine());
}

// Limits this thread's OpenMP team (and so oneDNN's) to one thread while in scope.
class OneOmpThread {
 public:
  OneOmpThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(saved_); }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_;
};

// Per-thread oneDNN memory objects for one Forward call. Only data handles change per call, so a
// warm thread allocates nothing. Keys fix the memory descriptor completely, so entries never go
// stale; rows never exceed Linear::kMaxPieceRows, so the maps stay small (one entry per activation
// shape and per scratchpad size this thread has seen).
class ThreadMemories {
 public:
  static ThreadMemories& Get() {
    thread_local ThreadMemories memories;
    return memories;
  }

  // A dense row-major [rows, cols] f32 activation at `data`; `role` tells the source from the
  // destination, which may have the same shape in one call.
  dnnl_memory_t Activation(int64_t rows, int64_t cols, int role, const float* data) {
    const uint64_t key = (static_cast<uint64_t>(cols) << 16) |
                         (static_cast<uint64_t>(rows) << 1) | static_cast<uint64_t>(role);
    auto it = activations_.find(key);
    if (it == activations_.end()) {
      it = activations_.emplace(key, memory(RowMajor(rows, cols), CpuEngine(), DNNL_MEMORY_NONE))
               .first;
    }
    it->second.set_data_handle(const_cast<float*>(data));
    return it->second.get();
  }

  // This thread's scratchpad, at least `bytes` long (bytes > 0).
  dnnl_memory_t Scratchpad(int64_t bytes) {
    if (bytes > buffer_bytes_) {  // grow: one owned, 64-byte aligned buffer per thread
      buffer_ = memory(memory::desc({bytes}, dt::u8, tag::a), CpuEngine());
      buffer_bytes_ = bytes;
    }
    auto it = scratchpads_.find(bytes);
    if (it == scratchpads_.end()) {
      it = scratchpads_
               .emplace(bytes, memory(memory::desc({bytes}, dt::u8, tag::a), CpuEngine(),
                                      DNNL_MEMORY_NONE))
               .first;
    }
    it->second.set_data_handle(buffer_.get_data_handle());
    return it->second.get();
  }

 private:
  absl::flat_hash_map<uint64_t, memory> activations_;
  absl::flat_hash_map<int64_t, memory> scratchpads_;
  memory buffer_;
  int64_t buffer_bytes_ = 0;
};

}  // namespace

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

struct Linear::Primitive {
  dnnl::matmul matmul;
  dnnl_memory_t weights;    // packed_weight_mem_ or plain_weight_mem_ of the owning Linear
  int64_t scratchpad_bytes;  // user-managed scratchpad this primitive needs (0: none)
};

Linear::Linear(const float* weight, const float* bias, int64_t in, int64_t out,
               Activation activation)
    : in_(in),
      out_(out),
      activation_(activation),
      piece_rows_(in * out * 4 > kLargeWeightBytes ? kMaxPieceRows : kSmallPieceRows) {
  plain_weight_mem_ =
      memory({{in, out}, dt::f32, tag::ba}, CpuEngine(), const_cast<float*>(weight));
  if (bias != nullptr) {
    bias_mem_ = memory({{1, out}, dt::f32, tag::ab}, CpuEngine(), const_cast<float*>(bias));
  }
  // Ask for the layout oneDNN prefers and reorder into it once; keep the plain view if it prefers
  // that anyway (tiny shapes) or offers nothing better.
  const auto pd = MatmulPd(kRepresentativeRows, in, out, memory::desc({in, out}, dt::f32, tag::any),
                           bias_mem_, dnnl::primitive_attr());
  const memory::desc preferred = pd.weights_desc();
  if (preferred != plain_weight_mem_.get_desc()) {
    packed_weight_mem_ = memory(preferred, CpuEngine());
    // One thread: the copy is memory-bound (~10 ms for the whole demo model), and a model may be
    // loaded while engine workers compute, where an OpenMP team would spin against them.
    OneOmpThread one_thread;
    dnnl::reorder(plain_weight_mem_, packed_weight_mem_)
        .execute(ThreadStream(), plain_weight_mem_, packed_weight_mem_);
    ThreadStream().wait();
    packed_ = true;
  }
}

Linear::Linear(Linear&& other) noexcept
    : in_(other.in_),
      out_(other.out_),
      activation_(other.activation_),
      packed_(other.packed_),
      piece_rows_(other.piece_rows_),
      plain_weight_mem_(std::move(other.plain_weight_mem_)),
      packed_weight_mem_(std::move(other.packed_weight_mem_)),
      bias_mem_(std::move(other.bias_mem_)) {
  // The primitives point at the weight memory objects, which moved with their handles intact.
  absl::MutexLock lock(&other.create_mu_);
  for (size_t i = 0; i < primitives_.size(); ++i) {
    primitives_[i].store(other.primitives_[i].exchange(nullptr, std::memory_order_acq_rel),
                         std::memory_order_release);
  }
}

Linear::~Linear() {
  for (auto& p : primitives_) delete p.load(std::memory_order_acquire);
}

const Linear::Primitive& Linear::GetPrimitive(int64_t rows, bool accumulate) const {
  std::atomic<Primitive*>& slot = primitives_[Slot(rows, accumulate)];
  if (const Primitive* p = slot.load(std::memory_order_acquire)) return *p;

  absl::MutexLock lock(&create_mu_);
  if (const Primitive* p = slot.load(std::memory_order_acquire)) return *p;
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  if (activation_ != Activation::kNone) {
    // alpha is relu's negative slope (0) and swish's sigmoid scale (1); gelu ignores it.
    const float alpha = activation_ == Activation::kRelu ? 0.0f : 1.0f;
    ops.append_eltwise(1.0f, EltwiseAlgorithm(activation_), alpha, 0.0f);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  // With the library-managed scratchpad, oneDNN 2.6 primitives must not run on two threads at
  // once (nor on a thread other than the creating one); with a user scratchpad per thread, they
  // may. Executing one primitive from two threads with the default mode gave wrong results.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto pd = MatmulPd(rows, in_, out_, memory::desc({in_, out_}, dt::f32, tag::any), bias_mem_,
                     attr);
  dnnl_memory_t weights = packed_weight_mem_.get(/*allow_empty=*/true);
  if (!packed_ || pd.weights_desc() != packed_weight_mem_.get_desc()) {
    // No packed copy, or oneDNN wants another layout for this row count: use the caller's
    // weights in place.
    pd = MatmulPd(rows, in_, out_, plain_weight_mem_.get_desc(), bias_mem_, attr);
    weights = plain_weight_mem_.get();
  }
  auto p = std::make_unique<Primitive>();
  p->matmul = dnnl::matmul(pd);
  p->weights = weights;
  p->scratchpad_bytes = static_cast<int64_t>(pd.scratchpad_desc().get_size());
  Primitive* raw = p.release();
  slot.store(raw, std::memory_order_release);
  return *raw;
}

void Linear::Forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  // Split into near-equal pieces of at most piece_rows_ rows.
  const int64_t pieces = (rows + piece_rows_ - 1) / piece_rows_;
  const int64_t base = rows / pieces, extra = rows % pieces;
  dnnl::stream& stream = ThreadStream();
  ThreadMemories& memories = ThreadMemories::Get();
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t n = base + (i < extra ? 1 : 0);
    const Primitive& p = GetPrimitive(n, accumulate);
    dnnl_exec_arg_t args[5];
    int count = 0;
    args[count++] = {DNNL_ARG_SRC, memories.Activation(n, in_, 0, x)};
    args[count++] = {DNNL_ARG_WEIGHTS, p.weights};
    args[count++] = {DNNL_ARG_DST, memories.Activation(n, out_, 1, y)};
    if (bias_mem_) args[count++] = {DNNL_ARG_BIAS, bias_mem_.get()};
    if (p.scratchpad_bytes > 0) {
      args[count++] = {DNNL_ARG_SCRATCHPAD, memories.Scratchpad(p.scratchpad_bytes)};
    }
    const dnnl_status_t status = dnnl_primitive_execute(p.matmul.get(), stream.get(), count, args);
    if (status != dnnl_success) throw dnnl::error(status, "Linear: matmul execution failed");
    x += n * in_;
    y += n * out_;
  }
  stream.wait();
}

}  // namespace glossa
