#include "ops/linear.h"

#include <cstdlib>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "ops/gemv.h"
#include "ops/ops.h"
#include "ops/quantize.h"

namespace glossa {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Row count used to ask oneDNN for its preferred weight layout. The brgemm matmul picks the
// layout from K and N only (checked for 1..256 rows on every shape of the demo model), and every
// primitive is checked against it anyway.
constexpr int64_t kRepresentativeRows = 32;

memory::desc RowMajor(int64_t rows, int64_t cols, dt type = dt::f32) {
  return memory::desc({rows, cols}, type, tag::ab);
}

// Data types of the matmul's input, weights and output for a compute type.
struct MatmulTypes {
  dt src, weights, dst;
};
MatmulTypes TypesOf(ComputeType compute) {
  switch (compute) {
    case ComputeType::kBFloat16:
      return {dt::bf16, dt::bf16, dt::f32};
    case ComputeType::kInt8:
    case ComputeType::kInt8Fast:
      return {dt::u8, dt::s8, dt::s32};
    case ComputeType::kFloat32:
      break;
  }
  return {dt::f32, dt::f32, dt::f32};
}

// The int8 path's activation, applied after our epilogue (oneDNN applies it as a post-op for the
// other compute types).
void ApplyActivation(Activation activation, float* y, int64_t n) {
  switch (activation) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      return;
    case Activation::kSwish:
      return ops::Swish(y, n);
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * y[i] * (1.0f + std::erf(y[i] * 0.70710678f));
      return;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      }
      return;
  }
}

dnnl::matmul::primitive_desc MatmulPd(int64_t rows, int64_t in, int64_t out, ComputeType compute,
                                      const memory::desc& weights, const dnnl::memory& bias,
                                      const dnnl::primitive_attr& attr) {
  const MatmulTypes types = TypesOf(compute);
  const memory::desc src = RowMajor(rows, in, types.src), dst = RowMajor(rows, out, types.dst);
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

  // A dense row-major [rows, cols] activation of `type` at `data`; `role` tells the source from
  // the destination, which may have the same shape in one call.
  dnnl_memory_t Activation(int64_t rows, int64_t cols, dt type, int role, const void* data) {
    const uint64_t key = (static_cast<uint64_t>(cols) << 20) |
                         (static_cast<uint64_t>(type) << 12) | (static_cast<uint64_t>(rows) << 1) |
                         static_cast<uint64_t>(role);
    auto it = activations_.find(key);
    if (it == activations_.end()) {
      it = activations_
               .emplace(key, memory(RowMajor(rows, cols, type), CpuEngine(), DNNL_MEMORY_NONE))
               .first;
    }
    it->second.set_data_handle(const_cast<void*>(data));
    return it->second.get();
  }

  // Grow-only per-thread buffers for the reduced-precision paths.
  template <typename T>
  static T* Grow(std::vector<T>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  }
  uint16_t* Bf16Input(int64_t n) { return Grow(bf16_input_, n); }
  uint8_t* U8Input(int64_t n) { return Grow(u8_input_, n); }
  float* RowScales(int64_t n) { return Grow(row_scales_, n); }
  int32_t* ZeroPoints(int64_t n) { return Grow(zero_points_, n); }
  int32_t* Accumulators(int64_t n) { return Grow(accumulators_, n); }
  float* BlockOutput(int64_t n) { return Grow(block_output_, n); }

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
  std::vector<uint16_t> bf16_input_;
  std::vector<uint8_t> u8_input_;
  std::vector<float> row_scales_;
  std::vector<int32_t> zero_points_;
  std::vector<int32_t> accumulators_;
  std::vector<float> block_output_;
};

}  // namespace

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

// alpha is relu's negative slope (0) and swish's sigmoid scale (1); gelu ignores it.
float EltwiseAlpha(Activation activation) { return activation == Activation::kRelu ? 0.0f : 1.0f; }

dnnl::post_ops MatmulPostOps(bool accumulate, Activation activation) {
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  if (activation != Activation::kNone) {
    ops.append_eltwise(1.0f, EltwiseAlgorithm(activation), EltwiseAlpha(activation), 0.0f);
  }
  return ops;
}

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = [] {
    // No AMX: oneDNN 2.6 runs bfloat16 matmuls of one row on AVX512-BF16 but of several rows on
    // AMX where the CPU has it (Sapphire Rapids), and the two round differently, so a sentence's
    // bfloat16 output would depend on what it was batched with (ComputeTypeTest saw it). Capped
    // at AVX512-BF16, every row count takes the same kernels and results equal those of CPUs
    // without AMX. int8 is exact either way. The cap must precede the first primitive; an
    // ONEDNN_MAX_CPU_ISA set in the environment wins (set_max_cpu_isa then fails, harmlessly).
    if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
      try {
        dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16);
      } catch (const dnnl::error&) {
      }
    }
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
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

const char* ComputeTypeName(ComputeType type) {
  switch (type) {
    case ComputeType::kBFloat16:
      return "bfloat16";
    case ComputeType::kInt8:
      return "int8";
    case ComputeType::kInt8Fast:
      return "int8_fast";
    case ComputeType::kFloat32:
      break;
  }
  return "float32";
}

const char* ComputeTypeNames() { return "float32, bfloat16, int8, int8_fast"; }

bool ParseComputeType(const std::string& name, ComputeType* type) {
  for (ComputeType t : {ComputeType::kFloat32, ComputeType::kBFloat16, ComputeType::kInt8,
                        ComputeType::kInt8Fast}) {
    if (name == ComputeTypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

Linear::Linear(const LinearWeights& weights, const float* bias, int64_t in, int64_t out,
               Activation activation, ComputeType compute, const PackedSliceDone& packed_slice,
               Packing packing, ops::StoredCopy copy_plain)
    : in_(in),
      out_(out),
      activation_(activation),
      compute_(compute),
      packed_slice_(packed_slice),
      copy_plain_(std::move(copy_plain)),
      piece_rows_((in * out * 4 > kLargeWeightBytes ? kMaxPieceRows : kSmallPieceRows) /
                  (compute == ComputeType::kInt8 ? 2 : 1)) {
  PrepareWeights(weights);
  if (bias != nullptr) {
    if (IsInt8(compute_)) {
      bias_ = bias;  // added by our epilogue
    } else {
      bias_mem_ = memory({{1, out}, dt::f32, tag::ab}, CpuEngine(), const_cast<float*>(bias));
    }
  }
  // Ask for the layout oneDNN prefers and reorder into it once; keep the plain view if it prefers
  // that anyway (tiny shapes) or offers nothing better.
  const auto pd = MatmulPd(kRepresentativeRows, in, out, compute_,
                           memory::desc({in, out}, TypesOf(compute_).weights, tag::any), bias_mem_,
                           dnnl::primitive_attr());
  const memory::desc preferred = pd.weights_desc();
  if (preferred == plain_weight_mem_.get_desc()) {
    // Never packed: the products read the plain weights, the Linear's own with copy_plain.
    if (copy_plain_ && callers_ != nullptr) {
      const size_t bytes = plain_weight_mem_.get_desc().get_size();
      plain_copy_.assign(static_cast<const uint8_t*>(callers_),
                         static_cast<const uint8_t*>(callers_) + bytes);
      plain_weight_mem_.set_data_handle(plain_copy_.data());
    }
    return;
  }
  packed_desc_ = preferred;
  if (compute_ == ComputeType::kFloat32) slab_stride_ = gemv::SlabStride(preferred, in);
  deferred_ = packing == Packing::kDeferred && compute_ == ComputeType::kFloat32 &&
              slab_stride_ != 0 && own_f32_.empty() && activation_ == Activation::kNone;
  if (!deferred_) Pack();
  ReleasePlain();
}

void Linear::ReleasePlain() {
  if (!packed() || (own_s8_.empty() && own_bf16_.empty() && !ReadsCallersThroughCopy())) return;
  std::vector<int8_t>().swap(own_s8_);
  std::vector<uint16_t>().swap(own_bf16_);
  plain_weight_mem_.set_data_handle(nullptr);
  plain_released_ = true;
}

void Linear::RestorePlain() const {
  if (!plain_released_ || !plain_copy_.empty()) return;
  plain_copy_.resize(plain_weight_mem_.get_desc().get_size());
  plain_weight_mem_.set_data_handle(plain_copy_.data());
  memory plain = plain_weight_mem_;  // handles: execute takes non-const ones
  memory packed = packed_weight_mem_;
  OneOmpThread one_thread;
  dnnl::reorder(packed, plain).execute(ThreadStream(), packed, plain);
  ThreadStream().wait();
}

void Linear::ConvertInSlices(const float* f32, bool report,
                             absl::FunctionRef<void(int64_t first, int64_t rows)> convert) {
  const int64_t slice = std::max<int64_t>(1, kPackSliceBytes / (in_ * 4));
  for (int64_t first = 0; first < out_; first += slice) {
    const int64_t rows = std::min(slice, out_ - first);
    convert(first, rows);
    if (report && packed_slice_) {
      packed_slice_(f32 + first * in_, static_cast<size_t>(rows * in_) * sizeof(float));
    }
  }
  // The pages that straddle two slices (a slice's drop takes whole pages inside it only).
  if (report && packed_slice_) {
    packed_slice_(f32, static_cast<size_t>(out_ * in_) * sizeof(float));
  }
}

void Linear::Pack() const {
  packed_weight_mem_ = memory(packed_desc_, CpuEngine());
  // One thread: the copy is memory-bound (~10 ms for the whole demo model), and a model may be
  // loaded while engine workers compute, where an OpenMP team would spin against them.
  OneOmpThread one_thread;
  // A deferred Linear packs after the constructor: with copy_plain, from slices copied out.
  const bool copy = deferred_ && ReadsCallersThroughCopy();
  if (!(packed_slice_ || copy) || !PackInSlices(copy)) {
    memory plain = plain_weight_mem_;  // a handle: execute takes non-const ones
    std::vector<uint8_t> copied;
    if (copy) {
      copied.resize(plain_weight_mem_.get_desc().get_size());
      copy_plain_(callers_, copied.size(), copied.data());
      plain = memory(plain_weight_mem_.get_desc(), CpuEngine(), copied.data());
    }
    dnnl::reorder(plain, packed_weight_mem_).execute(ThreadStream(), plain, packed_weight_mem_);
    ThreadStream().wait();
    if (packed_slice_ && !copy) {
      packed_slice_(plain_weight_mem_.get_data_handle(), plain_weight_mem_.get_desc().get_size());
    }
  }
  packed_.store(true, std::memory_order_release);
  if (!deferred_) return;
  // Products that ran from the plain weights while this copied them (StartPacking) may have
  // mapped pages again behind the slices' drops.
  if (packed_slice_ && !copy) packed_slice_(callers_, plain_weight_mem_.get_desc().get_size());
  if (copy) {  // under create_mu_, as RestorePlain: the caller's weights are not read again
    plain_weight_mem_.set_data_handle(nullptr);
    plain_released_ = true;
  }
}

void Linear::EnsurePacked() const {
  if (!deferred_ || packed()) return;
  absl::MutexLock lock(&create_mu_);
  if (!packed()) Pack();
}

void Linear::StartPacking() const {
  if (!deferred_ || packed() || packing_started_.exchange(true)) return;
  try {
    packer_ = std::thread([this] { EnsurePacked(); });
  } catch (const std::system_error&) {
    EnsurePacked();  // no thread to be had: pack on this one
  }
}

bool Linear::PackInSlices(bool copy) const {
  const memory::desc plain = plain_weight_mem_.get_desc(), packed = packed_weight_mem_.get_desc();
  const size_t row_bytes = plain.get_size() / static_cast<size_t>(out_);
  // Whole multiples of 256 output rows: the packed layouts block output rows by 16 to 64, and a
  // slice must start on a block. Slices copied out are ~1 MB: their buffer is held only while
  // this packs, but the heap keeps what it grew to (with 16 MB slices a beam-search run of the
  // demo model peaks 13-14 MB higher: docs/performance.md).
  const int64_t slice_bytes = copy ? int64_t{1} << 20 : kPackSliceBytes;
  const int64_t slice =
      std::max<int64_t>(256, slice_bytes / static_cast<int64_t>(row_bytes) / 256 * 256);
  const auto* plain_bytes = static_cast<const uint8_t*>(plain_weight_mem_.get_data_handle());
  std::vector<uint8_t> copied(copy ? static_cast<size_t>(std::min(slice, out_)) * row_bytes : 0);
  for (int64_t first = 0; first < out_; first += slice) {
    const int64_t rows = std::min(slice, out_ - first);
    try {
      memory src(plain.submemory_desc({in_, rows}, {0, first}), CpuEngine(),
                 plain_weight_mem_.get_data_handle());
      if (copy) {  // the slice's rows, copied out: a plain [rows, in] matrix of their own
        copy_plain_(static_cast<const uint8_t*>(callers_) + first * row_bytes, rows * row_bytes,
                    copied.data());
        src = memory({{in_, rows}, TypesOf(compute_).weights, tag::ba}, CpuEngine(), copied.data());
      }
      memory dst(packed.submemory_desc({in_, rows}, {0, first}), CpuEngine(),
                 packed_weight_mem_.get_data_handle());
      dnnl::reorder(src, dst).execute(ThreadStream(), src, dst);
      ThreadStream().wait();
    } catch (const dnnl::error&) {
      return false;
    }
    if (packed_slice_ && !copy) {
      packed_slice_(plain_bytes + first * row_bytes, static_cast<size_t>(rows) * row_bytes);
    }
  }
  return true;
}

void Linear::PrepareWeights(const LinearWeights& w) {
  const int64_t n = in_ * out_;
  // A float32 view of the weights, made only when they must change type.
  std::vector<float> widened;
  const float* f32 = w.f32;
  const bool keep = (compute_ == ComputeType::kFloat32 && w.f32 != nullptr) ||
                    (compute_ == ComputeType::kBFloat16 && w.bf16 != nullptr) ||
                    (IsInt8(compute_) && w.s8 != nullptr);
  if (f32 == nullptr && !keep) {
    widened.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      widened[i] = w.bf16 != nullptr ? quant::Bf16ToFloat(w.bf16[i])
                                     : static_cast<float>(w.s8[i]) * w.s8_scales[i / in_];
    }
    f32 = widened.data();
  }
  const MatmulTypes types = TypesOf(compute_);
  const void* data = nullptr;
  switch (compute_) {
    case ComputeType::kFloat32:
      own_f32_ = std::move(widened);
      data = f32;
      break;
    case ComputeType::kBFloat16:
      data = w.bf16;
      if (!keep) {
        own_bf16_.resize(n);
        ConvertInSlices(f32, f32 == w.f32, [&](int64_t first, int64_t rows) {
          quant::FloatToBf16(f32 + first * in_, rows * in_, own_bf16_.data() + first * in_);
        });
        data = own_bf16_.data();
      }
      break;
    case ComputeType::kInt8:
    case ComputeType::kInt8Fast: {
      const int8_t* q = w.s8;
      if (keep) {
        scales_.assign(w.s8_scales, w.s8_scales + out_);
      } else {
        own_s8_.resize(n);
        scales_.resize(out_);
        ConvertInSlices(f32, f32 == w.f32, [&](int64_t first, int64_t rows) {
          quant::QuantizeWeightRows(f32 + first * in_, rows, in_, own_s8_.data() + first * in_,
                                    scales_.data() + first);
        });
        q = own_s8_.data();
      }
      col_sums_.assign(out_, 0);
      for (int64_t o = 0; o < out_; ++o) {
        for (int64_t i = 0; i < in_; ++i) col_sums_[o] += q[o * in_ + i];
      }
      data = q;
      break;
    }
  }
  if (keep) callers_ = data;
  plain_weight_mem_ =
      memory({{in_, out_}, types.weights, tag::ba}, CpuEngine(), const_cast<void*>(data));
}

Linear::Linear(Linear&& other) noexcept
    : in_(other.in_),
      out_(other.out_),
      activation_(other.activation_),
      compute_(other.compute_),
      own_f32_(std::move(other.own_f32_)),
      own_bf16_(std::move(other.own_bf16_)),
      own_s8_(std::move(other.own_s8_)),
      plain_copy_(std::move(other.plain_copy_)),
      plain_released_(other.plain_released_),
      callers_(other.callers_),
      scales_(std::move(other.scales_)),
      col_sums_(std::move(other.col_sums_)),
      bias_(other.bias_),
      packed_(other.packed()),
      deferred_(other.deferred_),
      packed_desc_(other.packed_desc_),
      packed_slice_(std::move(other.packed_slice_)),
      copy_plain_(std::move(other.copy_plain_)),
      piece_rows_(other.piece_rows_),
      slab_stride_(other.slab_stride_),
      gemv_chunk_{other.gemv_chunk_[0].load(), other.gemv_chunk_[1].load()},
      plain_weight_mem_(std::move(other.plain_weight_mem_)),
      packed_weight_mem_(std::move(other.packed_weight_mem_)),
      bias_mem_(std::move(other.bias_mem_)),
      block_weights_(std::move(other.block_weights_)),
      block_bias_(std::move(other.block_bias_)) {
  // Linears are moved while the model is built, before any product: StartPacking has not run
  // (its thread would hold `other`; joined here all the same).
  if (other.packer_.joinable()) other.packer_.join();
  // The primitives point at the weight memory objects, which moved with their handles intact.
  absl::MutexLock lock(&other.create_mu_);
  for (size_t i = 0; i < primitives_.size(); ++i) {
    primitives_[i].store(other.primitives_[i].exchange(nullptr, std::memory_order_acq_rel),
                         std::memory_order_release);
    block_primitives_[i].store(
        other.block_primitives_[i].exchange(nullptr, std::memory_order_acq_rel),
        std::memory_order_release);
  }
}

Linear::~Linear() {
  if (packer_.joinable()) packer_.join();
  for (auto& p : primitives_) delete p.load(std::memory_order_acquire);
  for (auto& p : block_primitives_) delete p.load(std::memory_order_acquire);
}

const Linear::Primitive& Linear::GetPrimitive(int64_t rows, bool accumulate) const {
  std::atomic<Primitive*>& slot = primitives_[Slot(rows, accumulate)];
  if (const Primitive* p = slot.load(std::memory_order_acquire)) return *p;

  absl::MutexLock lock(&create_mu_);
  if (const Primitive* p = slot.load(std::memory_order_acquire)) return *p;
  dnnl::primitive_attr attr;  // int8 applies its activation itself, after its epilogue
  attr.set_post_ops(MatmulPostOps(accumulate, IsInt8(compute_) ? Activation::kNone : activation_));
  // With the library-managed scratchpad, oneDNN 2.6 primitives must not run on two threads at
  // once (nor on a thread other than the creating one); with a user scratchpad per thread, they
  // may. Executing one primitive from two threads with the default mode gave wrong results.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto pd = MatmulPd(rows, in_, out_, compute_,
                     memory::desc({in_, out_}, TypesOf(compute_).weights, tag::any), bias_mem_, attr);
  dnnl_memory_t weights = packed_weight_mem_.get(/*allow_empty=*/true);
  if (!packed() || pd.weights_desc() != packed_weight_mem_.get_desc()) {
    // No packed copy, or oneDNN wants another layout for this row count: use the caller's
    // weights in place (or, converted ones released, a plain copy made back from the packed).
    RestorePlain();
    pd = MatmulPd(rows, in_, out_, compute_, plain_weight_mem_.get_desc(), bias_mem_, attr);
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

Linear::Span Linear::WeightSpan() const {
  const memory& m = packed() ? packed_weight_mem_ : plain_weight_mem_;
  return {m.get_data_handle(), m.get_desc().get_size()};
}

const void* Linear::PlainWeights() const {
  absl::MutexLock lock(&create_mu_);
  RestorePlain();
  return plain_weight_mem_.get_data_handle();
}

Linear::Float32Slabs Linear::Float32SlabLayout() const {
  if (compute_ != ComputeType::kFloat32 || slab_stride_ == 0 ||
      activation_ != Activation::kNone || (!packed() && !deferred_)) {
    return {};
  }
  return {slab_stride_,
          bias_mem_ ? static_cast<const float*>(bias_mem_.get_data_handle()) : nullptr};
}

const float* Linear::Float32Slab(int64_t s, float* scratch) const {
  if (packed()) {
    return static_cast<const float*>(packed_weight_mem_.get_data_handle()) + s * slab_stride_;
  }
  const int64_t first = s * gemv::kSlabCols, cols = std::min(gemv::kSlabCols, out_ - first);
  const float* rows = static_cast<const float*>(callers_) + first * in_;
  if (copy_plain_) {  // the slab's rows, copied out of the caller's weights
    thread_local std::vector<float> copied;
    if (copied.size() < static_cast<size_t>(cols * in_)) copied.resize(cols * in_);
    copy_plain_(rows, static_cast<uint64_t>(cols * in_) * sizeof(float), copied.data());
    rows = copied.data();
  }
  gemv::PlainToSlab(rows, in_, cols, scratch);
  return scratch;
}

void Linear::ReleasePlainColumns(int64_t first, int64_t cols) const {
  if (!deferred_ || !packed_slice_ || copy_plain_ || cols <= 0) return;
  const auto* plain = static_cast<const uint8_t*>(callers_);
  packed_slice_(plain + first * in_ * 4, static_cast<size_t>(cols * in_ * 4));
}

bool Linear::ForwardColumns(const float* x, int64_t rows, int64_t first, int64_t cols,
                            float* y) const {
  const Float32Slabs layout = Float32SlabLayout();
  if (layout.slab_stride == 0 || first % gemv::kSlabCols != 0 || first < 0 || cols <= 0 ||
      first + cols > out_ || rows < 1 || rows > gemv::kMaxRows) {
    return false;
  }
  if (!packed()) return ForwardFromPlain(x, rows, first, cols, y, cols, /*release=*/false);
  const int64_t chunk = GemvChunk(false);
  if (chunk == 0) return false;
  const gemv::PackedWeights w{Float32Slab(first / gemv::kSlabCols, nullptr), in_, cols,
                              slab_stride_, chunk};
  gemv::Forward(w, x, rows, layout.bias != nullptr ? layout.bias + first : nullptr, false,
                activation_, y);
  return true;
}

// Per-thread buffers of ForwardFromPlain: one slab in the packed layout (64-byte aligned, as
// ops/gemv.h's kernel loads it) and its product.
struct PlainScratch {
  std::vector<float> slab, product;
  float* Slab(int64_t floats) {
    constexpr int64_t kAlign = 64 / sizeof(float);
    if (static_cast<int64_t>(slab.size()) < floats + kAlign) slab.resize(floats + kAlign);
    const uintptr_t at = reinterpret_cast<uintptr_t>(slab.data());
    return reinterpret_cast<float*>((at + 63) & ~uintptr_t{63});
  }
};

bool Linear::ForwardFromPlain(const float* x, int64_t rows, int64_t first, int64_t cols,
                              float* y, int64_t y_stride, bool release) const {
  const int64_t chunk = GemvChunk(false);
  if (chunk == 0) return false;
  constexpr int64_t kCols = gemv::kSlabCols;
  thread_local PlainScratch scratch;
  float* slab = scratch.Slab(slab_stride_);
  scratch.product.resize(std::max<size_t>(scratch.product.size(), rows * kCols));
  const float* bias = bias_mem_ ? static_cast<const float*>(bias_mem_.get_data_handle()) : nullptr;
  for (int64_t c = first; c < first + cols; c += kCols) {
    const int64_t n = std::min(kCols, first + cols - c);
    // With copy_plain, the slab's rows are copied out of the caller's weights (a file that
    // then never maps into this process: ModelFile::CopyOut).
    const float* weights = Float32Slab(c / kCols, slab);
    const gemv::PackedWeights w{weights, in_, n, slab_stride_, chunk};
    gemv::Forward(w, x, rows, bias != nullptr ? bias + c : nullptr, false, activation_,
                  scratch.product.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(scratch.product.data() + r * n, n, y + r * y_stride + (c - first));
    }
    const int64_t done = c + n - first;
    if (release && (done % kColumnBlock == 0 || done == cols)) {
      ReleasePlainColumns(c + n - ((done - 1) % kColumnBlock + 1), (done - 1) % kColumnBlock + 1);
    }
  }
  return true;
}

void Linear::Forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  // Split into near-equal pieces of at most piece_rows_ rows.
  const int64_t pieces = (rows + piece_rows_ - 1) / piece_rows_;
  const int64_t base = rows / pieces, extra = rows % pieces;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t n = base + (i < extra ? 1 : 0);
    ForwardPiece(x, n, y, accumulate);
    x += n * in_;
    y += n * out_;
  }
}

namespace {

// Bytes from the start of `packed` (the whole [in, out] weights in oneDNN's blocked layout) to
// column `first`, where a matmul over columns [first, first + n) that wants the layout `block` can
// read the packed copy as it is: the same blocking (slabs of whole columns, the same strides, the
// same padded input) and `first` the start of a slab. -1 where it cannot.
int64_t ColumnBlockOffset(const memory::desc& packed, const memory::desc& block, int64_t first) {
  const dnnl_memory_desc_t &p = packed.data, &b = block.data;
  if (p.ndims != 2 || b.ndims != 2 || p.format_kind != dnnl_blocked ||
      b.format_kind != dnnl_blocked || p.data_type != b.data_type ||
      p.padded_dims[0] != b.padded_dims[0] || p.offset0 != 0 || b.offset0 != 0 ||
      p.extra.flags != 0 || b.extra.flags != 0) {
    return -1;
  }
  const dnnl_blocking_desc_t &pb = p.format_desc.blocking, &bb = b.format_desc.blocking;
  if (pb.inner_nblks != bb.inner_nblks || pb.strides[0] != bb.strides[0] ||
      pb.strides[1] != bb.strides[1]) {
    return -1;
  }
  int64_t slab_cols = 1;
  for (int i = 0; i < pb.inner_nblks; ++i) {
    if (pb.inner_blks[i] != bb.inner_blks[i] || pb.inner_idxs[i] != bb.inner_idxs[i]) return -1;
    if (pb.inner_idxs[i] == 1) slab_cols *= pb.inner_blks[i];
  }
  if (first % slab_cols != 0) return -1;
  return first / slab_cols * pb.strides[1] * static_cast<int64_t>(memory::data_type_size(
                                                  static_cast<dt>(p.data_type)));
}

}  // namespace

const Linear::Primitive* Linear::GetBlockPrimitive(int64_t rows, bool last) const {
  std::atomic<Primitive*>& slot = block_primitives_[Slot(rows, last)];
  const Primitive* p = slot.load(std::memory_order_acquire);
  if (p != nullptr) return p->matmul ? p : nullptr;

  absl::MutexLock lock(&create_mu_);
  p = slot.load(std::memory_order_acquire);
  if (p != nullptr) return p->matmul ? p : nullptr;
  const int64_t blocks = (out_ + kColumnBlock - 1) / kColumnBlock;
  const int64_t cols = last ? out_ - (blocks - 1) * kColumnBlock : kColumnBlock;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // as GetPrimitive
  // int8 adds its bias in its epilogue (bias_mem_ is empty then).
  const MatmulTypes types = TypesOf(compute_);
  const memory::desc src = RowMajor(rows, in_, types.src), bias({1, cols}, dt::f32, tag::ab),
                     dst = RowMajor(rows, cols, types.dst),
                     any({in_, cols}, types.weights, tag::any);
  auto desc =
      bias_mem_ ? dnnl::matmul::desc(src, any, bias, dst) : dnnl::matmul::desc(src, any, dst);
  const dnnl::matmul::primitive_desc pd(desc, attr, CpuEngine());
  auto made = std::make_unique<Primitive>();
  made->weights = nullptr;
  made->scratchpad_bytes = 0;
  // The block must read the packed copy as it is, from the block's first slab on (a block of
  // 1024 columns starts on a slab).
  const memory::desc chosen = pd.weights_desc();
  // Each block's weights are one memory object, made with the first primitive that reads it;
  // a later row count must expect the very same layout.
  const int64_t b0 = last ? blocks - 1 : 0;
  const bool usable = ColumnBlockOffset(packed_desc_, chosen, b0 * kColumnBlock) >= 0 &&
                      (block_weights_.empty() || !block_weights_[b0] ||
                       block_weights_[b0].get_desc() == chosen);
  if (usable) {
    if (block_weights_.empty()) {  // sized once, before any block primitive is published
      block_weights_.resize(blocks);
      block_bias_.resize(blocks);
    }
    auto* packed = static_cast<char*>(packed_weight_mem_.get_data_handle());
    auto* bias_data = bias_mem_ ? static_cast<float*>(bias_mem_.get_data_handle()) : nullptr;
    for (int64_t b = b0; b < (last ? blocks : blocks - 1); ++b) {
      if (block_weights_[b]) continue;
      const int64_t first = b * kColumnBlock;
      block_weights_[b] = memory(chosen, CpuEngine(),
                                 packed + ColumnBlockOffset(packed_desc_, chosen, first));
      if (bias_data != nullptr) block_bias_[b] = memory(bias, CpuEngine(), bias_data + first);
    }
    made->matmul = dnnl::matmul(pd);
    made->scratchpad_bytes = static_cast<int64_t>(pd.scratchpad_desc().get_size());
  }
  p = made.release();
  slot.store(const_cast<Primitive*>(p), std::memory_order_release);
  return p->matmul ? p : nullptr;
}

void Linear::RunBlockMatmul(const Primitive& p, int64_t b, const void* src, int64_t rows,
                            void* dst) const {
  RunMatmul(p, src, rows, dst, block_weights_[b].get(),
            bias_mem_ ? block_bias_[b].get() : nullptr,
            std::min(kColumnBlock, out_ - b * kColumnBlock));
}

bool Linear::ForwardPieceInBlocks(const float* x, int64_t rows, int64_t first_row,
                                  BlockDone done) const {
  if (IsInt8(compute_)) return ForwardInt8PieceInBlocks(x, rows, first_row, done);
  const int64_t blocks = (out_ + kColumnBlock - 1) / kColumnBlock;
  float* out = ThreadMemories::Get().BlockOutput(rows * kColumnBlock);
  // Few rows: ops/gemv.h's kernel over each block of the packed weights (itself a packed matrix
  // of that width).
  if (rows <= gemv::RowLimit() && GemvChunk(false) > 0) {
    for (int64_t first = 0; first < out_; first += kColumnBlock) {
      const int64_t cols = std::min(kColumnBlock, out_ - first);
      // Cannot decline here: ForwardInColumnBlocks asks what PackedFloat32View does, and the
      // chunk was found above.
      if (!ForwardColumns(x, rows, first, cols, out)) return false;
      done(first_row, rows, first, cols, out, cols);
    }
    return true;
  }
  const Primitive* full = GetBlockPrimitive(rows, false);
  const Primitive* last = GetBlockPrimitive(rows, true);
  if (full == nullptr || last == nullptr) return false;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kColumnBlock, cols = std::min(kColumnBlock, out_ - first);
    RunBlockMatmul(b + 1 < blocks ? *full : *last, b, x, rows, out);
    done(first_row, rows, first, cols, out, cols);
  }
  return true;
}

bool Linear::ForwardInt8PieceInBlocks(const float* x, int64_t rows, int64_t first_row,
                                      BlockDone done) const {
  const bool residual = compute_ == ComputeType::kInt8;
  const int64_t matmul_rows = residual ? 2 * rows : rows;
  // Few rows: the whole product fits in cache anyway, and one matmul costs less than 15 calls.
  if (rows < kInt8BlockMinRows) return false;
  const Primitive* full = GetBlockPrimitive(matmul_rows, false);
  const Primitive* last = GetBlockPrimitive(matmul_rows, true);
  if (full == nullptr || last == nullptr) return false;
  ThreadMemories& memories = ThreadMemories::Get();
  uint8_t* quantized = memories.U8Input(matmul_rows * in_);
  float* row_scales = memories.RowScales(rows);
  int32_t* zero_points = memories.ZeroPoints(rows);
  quant::QuantizeActivationRows(x, rows, in_, quantized, row_scales, zero_points, residual);
  int32_t* acc = memories.Accumulators(matmul_rows * kColumnBlock);
  // The epilogue converts each block's s32 sums into floats in place (row r of the block over
  // row r of its sums; the residual codes' rows come after them).
  float* out = reinterpret_cast<float*>(acc);
  const int64_t blocks = (out_ + kColumnBlock - 1) / kColumnBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kColumnBlock, cols = std::min(kColumnBlock, out_ - first);
    RunBlockMatmul(b + 1 < blocks ? *full : *last, b, quantized, matmul_rows, acc);
    quant::Dequantize(acc, rows, cols, col_sums_.data() + first, zero_points, row_scales,
                      scales_.data() + first, bias_ != nullptr ? bias_ + first : nullptr,
                      /*accumulate=*/false, out, residual ? acc + rows * cols : nullptr);
    done(first_row, rows, first, cols, out, cols);
  }
  return true;
}

void Linear::ForwardInColumnBlocks(const float* x, int64_t rows, float* y, BlockDone done) const {
  if (rows <= 0) return;
  const bool blocked =
      ((compute_ == ComputeType::kFloat32 && slab_stride_ != 0) || IsInt8(compute_)) &&
      packed() && activation_ == Activation::kNone && out_ > kColumnBlock &&
      omp_get_max_threads() == 1;
  const int64_t pieces = (rows + piece_rows_ - 1) / piece_rows_;
  const int64_t base = rows / pieces, extra = rows % pieces;
  int64_t first_row = 0;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t n = base + (i < extra ? 1 : 0);
    const float* xi = x + first_row * in_;
    float* yi = y + first_row * out_;
    if (!blocked || !ForwardPieceInBlocks(xi, n, first_row, done)) {
      ForwardPiece(xi, n, yi, /*accumulate=*/false);
      for (int64_t c = 0; c < out_; c += kColumnBlock) {
        done(first_row, n, c, std::min(kColumnBlock, out_ - c), yi + c, out_);
      }
    }
    first_row += n;
  }
}

void Linear::ForwardPiece(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (IsInt8(compute_)) return ForwardInt8Piece(x, rows, y, accumulate);
  if (deferred_ && !packed()) {
    // Every column: the pages are released as it goes, so that a step the screen could not
    // decide, or one while StartPacking's copy is made, does not map the whole matrix again.
    if (!accumulate && rows <= gemv::kMaxRows &&
        ForwardFromPlain(x, rows, 0, out_, y, out_, /*release=*/true)) {
      return;
    }
    EnsurePacked();
  }
  if (rows <= gemv::RowLimit() && ForwardSmallRows(x, rows, y, accumulate)) return;
  const void* src = x;
  if (compute_ == ComputeType::kBFloat16) {
    uint16_t* converted = ThreadMemories::Get().Bf16Input(rows * in_);
    quant::FloatToBf16(x, rows * in_, converted);
    src = converted;
  }
  RunMatmul(GetPrimitive(rows, accumulate), src, rows, y);
}

int64_t Linear::GemvChunk(bool accumulate) const {
  if (slab_stride_ == 0 || !gemv::internal::Enabled()) return 0;
  std::atomic<int64_t>& known = gemv_chunk_[accumulate ? 1 : 0];
  int64_t chunk = known.load(std::memory_order_acquire);
  if (chunk < 0) {
    chunk = gemv::MatchingChunk(in_, static_cast<bool>(bias_mem_), accumulate, activation_);
    known.store(chunk, std::memory_order_release);
  }
  return chunk;
}

bool Linear::ForwardSmallRows(const float* x, int64_t rows, float* y, bool accumulate) const {
  const int64_t chunk = GemvChunk(accumulate);
  if (chunk == 0) return false;
  const gemv::PackedWeights w{static_cast<const float*>(packed_weight_mem_.get_data_handle()), in_,
                              out_, slab_stride_, chunk};
  const float* bias = bias_mem_ ? static_cast<const float*>(bias_mem_.get_data_handle()) : nullptr;
  gemv::Forward(w, x, rows, bias, accumulate, activation_, y);
  return true;
}

// int8: quantize the input (with residual codes: 2 * rows matmul rows), an s32 matmul without
// post-ops, then our epilogue (accumulation included) and the activation.
void Linear::ForwardInt8Piece(const float* x, int64_t rows, float* y, bool accumulate) const {
  ThreadMemories& memories = ThreadMemories::Get();
  const bool residual = compute_ == ComputeType::kInt8;
  const int64_t matmul_rows = residual ? 2 * rows : rows;
  uint8_t* quantized = memories.U8Input(matmul_rows * in_);
  float* row_scales = memories.RowScales(rows);
  int32_t* zero_points = memories.ZeroPoints(rows);
  quant::QuantizeActivationRows(x, rows, in_, quantized, row_scales, zero_points, residual);
  // One code per value and no accumulation: the s32 results go straight into y, converted in
  // place.
  int32_t* acc = residual || accumulate ? memories.Accumulators(matmul_rows * out_)
                                        : reinterpret_cast<int32_t*>(y);
  RunMatmul(GetPrimitive(matmul_rows, false), quantized, matmul_rows, acc);
  quant::Dequantize(acc, rows, out_, col_sums_.data(), zero_points, row_scales, scales_.data(),
                    bias_, accumulate, y, residual ? acc + rows * out_ : nullptr);
  ApplyActivation(activation_, y, rows * out_);
}

void Linear::RunMatmul(const Primitive& p, const void* src, int64_t rows, void* dst) const {
  RunMatmul(p, src, rows, dst, p.weights, bias_mem_ ? bias_mem_.get() : nullptr, out_);
}

void Linear::RunMatmul(const Primitive& p, const void* src, int64_t rows, void* dst,
                       dnnl_memory_t weights, dnnl_memory_t bias, int64_t cols) const {
  ThreadMemories& memories = ThreadMemories::Get();
  const MatmulTypes types = TypesOf(compute_);
  dnnl_exec_arg_t args[5];
  int count = 0;
  args[count++] = {DNNL_ARG_SRC, memories.Activation(rows, in_, types.src, 0, src)};
  args[count++] = {DNNL_ARG_WEIGHTS, weights};
  args[count++] = {DNNL_ARG_DST, memories.Activation(rows, cols, types.dst, 1, dst)};
  if (bias != nullptr) args[count++] = {DNNL_ARG_BIAS, bias};
  if (p.scratchpad_bytes > 0) {
    args[count++] = {DNNL_ARG_SCRATCHPAD, memories.Scratchpad(p.scratchpad_bytes)};
  }
  dnnl::stream& stream = ThreadStream();
  const dnnl_status_t status = dnnl_primitive_execute(p.matmul.get(), stream.get(), count, args);
  if (status != dnnl_success) throw dnnl::error(status, "Linear: matmul execution failed");
  stream.wait();
}

}  // namespace glossa
