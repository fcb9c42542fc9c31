#include "ops/linear.h"

#include <utility>

namespace glossa {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

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
  memory::desc src_md;
  memory::desc dst_md;
  dnnl::matmul matmul;
};

Linear::Linear(const float* weight, const float* bias, int64_t in, int64_t out,
               Activation activation)
    : in_(in), out_(out), activation_(activation) {
  weight_mem_ = memory({{in, out}, dt::f32, tag::ba}, CpuEngine(), const_cast<float*>(weight));
  if (bias != nullptr) {
    bias_mem_ = memory({{1, out}, dt::f32, tag::ab}, CpuEngine(), const_cast<float*>(bias));
  }
}

Linear::Linear(Linear&& other) noexcept
    : in_(other.in_),
      out_(other.out_),
      activation_(other.activation_),
      weight_mem_(std::move(other.weight_mem_)),
      bias_mem_(std::move(other.bias_mem_)) {
  absl::MutexLock lock(&other.mu_);
  primitives_ = std::move(other.primitives_);
}

Linear::~Linear() = default;

const Linear::Primitive& Linear::GetPrimitive(int64_t rows, bool accumulate) const {
  const int64_t key = rows * 2 + (accumulate ? 1 : 0);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = primitives_.find(key);
    if (it != primitives_.end()) return *it->second;
  }
  auto p = std::make_unique<Primitive>();
  p->src_md = memory::desc({rows, in_}, dt::f32, tag::ab);
  p->dst_md = memory::desc({rows, out_}, dt::f32, tag::ab);
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  if (activation_ != Activation::kNone) {
    // alpha is relu's negative slope (0) and swish's sigmoid scale (1); gelu ignores it.
    const float alpha = activation_ == Activation::kRelu ? 0.0f : 1.0f;
    ops.append_eltwise(1.0f, EltwiseAlgorithm(activation_), alpha, 0.0f);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  auto desc = bias_mem_ ? dnnl::matmul::desc(p->src_md, weight_mem_.get_desc(),
                                             bias_mem_.get_desc(), p->dst_md)
                        : dnnl::matmul::desc(p->src_md, weight_mem_.get_desc(), p->dst_md);
  p->matmul = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, CpuEngine()));
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = primitives_.emplace(key, std::move(p));
  return *it->second;
}

void Linear::Forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows == 0) return;
  const Primitive& p = GetPrimitive(rows, accumulate);
  memory src(p.src_md, CpuEngine(), const_cast<float*>(x));
  memory dst(p.dst_md, CpuEngine(), y);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weight_mem_}, {DNNL_ARG_DST, dst}};
  if (bias_mem_) args.emplace(DNNL_ARG_BIAS, bias_mem_);
  p.matmul.execute(ThreadStream(), args);
  ThreadStream().wait();
}

}  // namespace glossa
