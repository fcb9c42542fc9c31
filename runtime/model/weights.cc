#include "model/weights.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace glossa {
namespace {

class Finder {
 public:
  Finder(const ModelFile& file, int64_t d_model) : file_(file), d_(d_model) {}

  absl::StatusOr<std::unique_ptr<Linear>> LinearLayer(const std::string& prefix, int64_t in,
                                                      int64_t out, Activation act) {
    GLOSSA_ASSIGN_OR_RETURN(const float* w, file_.FloatTensor(prefix + ".weight", {out, in}));
    GLOSSA_ASSIGN_OR_RETURN(const float* b, file_.FloatTensor(prefix + ".bias", {out}));
    return std::make_unique<Linear>(w, b, in, out, act);
  }

  absl::StatusOr<LayerNormWeights> Norm(const std::string& prefix) {
    LayerNormWeights n;
    GLOSSA_ASSIGN_OR_RETURN(n.gamma, file_.FloatTensor(prefix + ".weight", {d_}));
    GLOSSA_ASSIGN_OR_RETURN(n.beta, file_.FloatTensor(prefix + ".bias", {d_}));
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
    GLOSSA_ASSIGN_OR_RETURN(s.embed_tokens,
                            file_.FloatTensor(prefix + ".embed_tokens.weight", {vocab, d_}));
    GLOSSA_ASSIGN_OR_RETURN(s.embed_positions, file_.FloatTensor(prefix + ".embed_positions.weight",
                                                                 {c.max_positions, d_}));
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
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelWeights>> LoadWeights(const ModelFile& file,
                                                          const ModelConfig& c) {
  auto w = std::make_unique<ModelWeights>();
  Finder find(file, c.d_model);
  GLOSSA_ASSIGN_OR_RETURN(w->encoder, find.Stack("encoder", c.source_vocab_size, c));
  GLOSSA_ASSIGN_OR_RETURN(w->decoder, find.Stack("decoder", c.target_vocab_size, c));
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
    w->encoder_layers.push_back(std::move(l));
  }
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
    w->decoder_layers.push_back(std::move(l));
  }
  GLOSSA_ASSIGN_OR_RETURN(const float* head,
                          file.FloatTensor("lm_head.weight", {c.target_vocab_size, c.d_model}));
  GLOSSA_ASSIGN_OR_RETURN(const float* bias,
                          file.FloatTensor("final_logits_bias", {c.target_vocab_size}));
  w->lm_head = std::make_unique<Linear>(head, bias, c.d_model, c.target_vocab_size);
  return w;
}

}  // namespace glossa
