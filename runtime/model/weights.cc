#include "model/weights.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "ops/row_cache.h"
#include "util/status_macros.h"

namespace glossa {
namespace {

// Reads weights left in `file` without mapping its pages (ModelFile::CopyOut): embedding rows, and
// every read a Linear makes of its weights in the file once it is constructed (a loaded model's
// file is not mapped: ModelFile::Unmap). Biases, norms and position tables, read in place
// by every step, are copies the ModelFile owns (OwnedFloatTensor).
ops::StoredCopy CopyOut(const ModelFile& file) {
  return [&file](const void* from, uint64_t bytes, void* to) { file.CopyOut(from, bytes, to); };
}

class Finder {
 public:
  Finder(const ModelFile& file, int64_t d_model, ComputeType compute)
      : file_(file), d_(d_model), compute_(compute) {}

  // A weight matrix [out, in] stored as float32, bfloat16 or int8 (with "<name>.scale").
  absl::StatusOr<LinearWeights> Matrix(const std::string& name, int64_t out, int64_t in) {
    GLOSSA_ASSIGN_OR_RETURN(const TensorView* t, file_.Tensor(name));
    const std::vector<int64_t> shape = {out, in};
    if (t->shape != shape || t->dtype == DType::kBytes) {
      TensorView expected;
      expected.shape = shape;
      return absl::InvalidArgumentError(absl::StrCat(
          "model file '", file_.path(), "': tensor '", name, "' has shape ", t->ShapeString(),
          ", expected ", expected.ShapeString(), " (it is ", DTypeName(t->dtype),
          "; a weight matrix may be float32, bfloat16 or int8)"));
    }
    LinearWeights w;
    if (t->dtype == DType::kFloat32) w.f32 = t->f32();
    if (t->dtype == DType::kBFloat16) w.bf16 = static_cast<const uint16_t*>(t->data);
    if (t->dtype == DType::kInt8) {
      w.s8 = static_cast<const int8_t*>(t->data);
      GLOSSA_ASSIGN_OR_RETURN(w.s8_scales, file_.FloatTensor(name + ".scale", {out}));
    }
    return w;
  }

  absl::StatusOr<std::unique_ptr<Linear>> LinearLayer(const std::string& prefix, int64_t in,
                                                      int64_t out, Activation act) {
    GLOSSA_ASSIGN_OR_RETURN(LinearWeights w, Matrix(prefix + ".weight", out, in));
    GLOSSA_ASSIGN_OR_RETURN(const float* b, file_.OwnedFloatTensor(prefix + ".bias", {out}));
    return MakeLinear(file_, w, b, in, out, act, compute_);
  }

  // oneDNN throws when it has no kernel for the compute type on this CPU. A packed Linear keeps
  // its own copy of the weights: the mapped originals need not stay in memory (the process's RSS
  // would hold the weights twice), and are dropped slice by slice as they are copied. Once
  // constructed it reads them only through CopyOut (ops/linear.h's copy_plain).
  static absl::StatusOr<std::unique_ptr<Linear>> MakeLinear(const ModelFile& file,
                                                            const LinearWeights& w,
                                                            const float* bias, int64_t in,
                                                            int64_t out, Activation act,
                                                            ComputeType compute,
                                                            Linear::Packing packing =
                                                                Linear::Packing::kNow) {
    try {
      return std::make_unique<Linear>(
          w, bias, in, out, act, compute,
          [&file](const void* plain, size_t bytes) { file.DropPages(plain, bytes); }, packing,
          CopyOut(file));
    } catch (const dnnl::error& e) {
      return absl::FailedPreconditionError(
          absl::StrCat("compute type ", ComputeTypeName(compute),
                       " is not available on this CPU (oneDNN: ", e.what(), ")"));
    }
  }

  absl::StatusOr<LayerNormWeights> Norm(const std::string& prefix) {
    LayerNormWeights n;
    GLOSSA_ASSIGN_OR_RETURN(n.gamma, file_.OwnedFloatTensor(prefix + ".weight", {d_}));
    GLOSSA_ASSIGN_OR_RETURN(n.beta, file_.OwnedFloatTensor(prefix + ".bias", {d_}));
    return n;
  }

  absl::StatusOr<AttentionWeights> Attention(const std::string& prefix) {
    AttentionWeights a;
    GLOSSA_ASSIGN_OR_RETURN(a.q, LinearLayer(prefix + ".q_proj", d_, d_, Activation::kNone));
    GLOSSA_ASSIGN_OR_RETURN(a.k, LinearLayer(prefix + ".k_proj", d_, d_, Activation::kNone));
    GLOSSA_ASSIGN_OR_RETURN(a.v, LinearLayer(prefix + ".v_proj", d_, d_, Activation::kNone));
    GLOSSA_ASSIGN_OR_RETURN(a.out, LinearLayer(prefix + ".out_proj", d_, d_, Activation::kNone));
    return a;
  }

  absl::StatusOr<StackWeights> Stack(const std::string& prefix, int64_t vocab,
                                     const ModelConfig& c) {
    StackWeights s;
    GLOSSA_ASSIGN_OR_RETURN(s.embed_tokens.rows,
                            file_.FloatTensor(prefix + ".embed_tokens.weight", {vocab, d_}));
    s.embed_tokens.copy = CopyOut(file_);
    s.embed_tokens.cache = std::make_shared<ops::RowCache>(
        s.embed_tokens.rows, vocab, d_, s.embed_tokens.copy,
        ops::RowCache::kDefaultBytes / (d_ * static_cast<int64_t>(sizeof(float))));
    GLOSSA_ASSIGN_OR_RETURN(
        s.embed_positions,
        file_.OwnedFloatTensor(prefix + ".embed_positions.weight",
                               {int64_t{c.max_positions} + c.position_offset, d_}));
    if (c.layernorm_embedding) {
      GLOSSA_ASSIGN_OR_RETURN(s.embedding_norm, Norm(prefix + ".layernorm_embedding"));
    }
    if (c.final_layer_norm) {
      GLOSSA_ASSIGN_OR_RETURN(s.final_norm, Norm(prefix + ".layer_norm"));
    }
    return s;
  }

 private:
  const ModelFile& file_;
  int64_t d_;
  ComputeType compute_;
};

// With a screen on this CPU the output projection's packing waits (ops/linear.h's
// Packing::kDeferred): greedy steps without scores read the screen's int8 copy and a few float32
// slabs from the file (ModelFile::CopyOut).
bool ProjectionDeferred(const WeightOptions& options) {
  return options.argmax_screen && options.output_compute == ComputeType::kFloat32 &&
         ArgMaxScreen::Supported();
}

absl::StatusOr<std::unique_ptr<Linear>> LoadOutputProjection(const ModelFile& file,
                                                             const ModelConfig& c,
                                                             const WeightOptions& options) {
  Finder find(file, c.d_model, options.compute);
  GLOSSA_ASSIGN_OR_RETURN(LinearWeights head,
                          find.Matrix("lm_head.weight", c.target_vocab_size, c.d_model));
  GLOSSA_ASSIGN_OR_RETURN(const float* bias,
                          file.OwnedFloatTensor("final_logits_bias", {c.target_vocab_size}));
  return Finder::MakeLinear(
      file, head, bias, c.d_model, c.target_vocab_size, Activation::kNone, options.output_compute,
      ProjectionDeferred(options) ? Linear::Packing::kDeferred : Linear::Packing::kNow);
}

absl::Status LoadEncoderLayers(const ModelFile& file, const ModelConfig& c,
                               ComputeType compute, std::vector<EncoderLayerWeights>* layers) {
  Finder find(file, c.d_model, compute);
  for (int i = 0; i < c.encoder_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layers.", i);
    EncoderLayerWeights l;
    GLOSSA_ASSIGN_OR_RETURN(l.self_attn, find.Attention(p + ".self_attn"));
    GLOSSA_ASSIGN_OR_RETURN(l.self_attn_norm, find.Norm(p + ".self_attn_layer_norm"));
    GLOSSA_ASSIGN_OR_RETURN(l.fc1, find.LinearLayer(p + ".fc1", c.d_model, c.encoder_ffn_dim,
                                                    c.activation));
    GLOSSA_ASSIGN_OR_RETURN(l.fc2, find.LinearLayer(p + ".fc2", c.encoder_ffn_dim, c.d_model,
                                                    Activation::kNone));
    GLOSSA_ASSIGN_OR_RETURN(l.final_norm, find.Norm(p + ".final_layer_norm"));
    layers->push_back(std::move(l));
  }
  return absl::OkStatus();
}

absl::Status LoadDecoderLayers(const ModelFile& file, const ModelConfig& c,
                               ComputeType compute, std::vector<DecoderLayerWeights>* layers) {
  Finder find(file, c.d_model, compute);
  for (int i = 0; i < c.decoder_layers; ++i) {
    const std::string p = absl::StrCat("decoder.layers.", i);
    DecoderLayerWeights l;
    GLOSSA_ASSIGN_OR_RETURN(l.self_attn, find.Attention(p + ".self_attn"));
    GLOSSA_ASSIGN_OR_RETURN(l.self_attn_norm, find.Norm(p + ".self_attn_layer_norm"));
    GLOSSA_ASSIGN_OR_RETURN(l.cross_attn, find.Attention(p + ".encoder_attn"));
    GLOSSA_ASSIGN_OR_RETURN(l.cross_attn_norm, find.Norm(p + ".encoder_attn_layer_norm"));
    GLOSSA_ASSIGN_OR_RETURN(l.fc1, find.LinearLayer(p + ".fc1", c.d_model, c.decoder_ffn_dim,
                                                    c.activation));
    GLOSSA_ASSIGN_OR_RETURN(l.fc2, find.LinearLayer(p + ".fc2", c.decoder_ffn_dim, c.d_model,
                                                    Activation::kNone));
    GLOSSA_ASSIGN_OR_RETURN(l.final_norm, find.Norm(p + ".final_layer_norm"));
    layers->push_back(std::move(l));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<ModelWeights>> LoadWeights(const ModelFile& file,
                                                          const ModelConfig& c,
                                                          const WeightOptions& options) {
  // Two threads copy the weights into oneDNN's layout: this one the decoder's layers, another
  // the output projection (the largest matrix) or, when its copy is deferred, the encoder's
  // layers (a 2-core machine loads NLLB-600M ~0.3 s sooner than on one thread).
  const bool deferred = ProjectionDeferred(options);
  std::vector<EncoderLayerWeights> encoder_layers;
  std::future<absl::StatusOr<std::unique_ptr<Linear>>> head =
      std::async(std::launch::async, [&]() -> absl::StatusOr<std::unique_ptr<Linear>> {
        GLOSSA_ASSIGN_OR_RETURN(std::unique_ptr<Linear> linear,
                                LoadOutputProjection(file, c, options));
        if (deferred) {
          GLOSSA_RETURN_IF_ERROR(LoadEncoderLayers(file, c, options.compute, &encoder_layers));
        }
        return linear;
      });
  auto w = std::make_unique<ModelWeights>();
  Finder find(file, c.d_model, options.compute);
  GLOSSA_ASSIGN_OR_RETURN(w->encoder, find.Stack("encoder", c.source_vocab_size, c));
  GLOSSA_ASSIGN_OR_RETURN(w->decoder, find.Stack("decoder", c.target_vocab_size, c));
  if (w->decoder.embed_tokens.rows == w->encoder.embed_tokens.rows) {  // one tensor, tied
    w->decoder.embed_tokens.cache = w->encoder.embed_tokens.cache;
  }
  if (!deferred) {
    GLOSSA_RETURN_IF_ERROR(LoadEncoderLayers(file, c, options.compute, &encoder_layers));
  }
  GLOSSA_RETURN_IF_ERROR(LoadDecoderLayers(file, c, options.compute, &w->decoder_layers));
  GLOSSA_ASSIGN_OR_RETURN(w->lm_head, head.get());
  w->encoder_layers = std::move(encoder_layers);
  if (options.argmax_screen && w->lm_head->Float32SlabLayout().slab_stride != 0) {
    w->lm_head_screen = std::make_unique<LazyArgMaxScreen>(*w->lm_head);
  }
  return w;
}

}  // namespace glossa
