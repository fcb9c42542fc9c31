#include "model/config.h"

#include "absl/strings/str_cat.h"

namespace glossa {
namespace {

absl::StatusOr<Activation> ParseActivation(const std::string& name) {
  if (name == "swish" || name == "silu") return Activation::kSwish;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new") return Activation::kGeluTanh;
  if (name == "relu") return Activation::kRelu;
  return absl::UnimplementedError(
      absl::StrCat("config.activation '", name, "' is not supported (swish, gelu, gelu_new, relu)"));
}

absl::Status CheckPositive(const char* key, int value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("config.", key, " must be positive, got ", value));
}

absl::StatusOr<ModelInfo> Parse(const nlohmann::json& header) {
  ModelInfo info;
  info.name = header.value("name", "");
  info.source_language = header.value("source_language", "");
  info.target_language = header.value("target_language", "");
  info.dtype = header.value("dtype", "float32");
  const nlohmann::json& c = header.at("config");
  ModelConfig& m = info.config;
  m.architecture = c.at("architecture").get<std::string>();
  if (m.architecture != "marian") {
    return absl::UnimplementedError(absl::StrCat("config.architecture '", m.architecture,
                                                 "' is not supported (only 'marian')"));
  }
  m.d_model = c.at("d_model").get<int>();
  m.encoder_layers = c.at("encoder_layers").get<int>();
  m.decoder_layers = c.at("decoder_layers").get<int>();
  m.encoder_heads = c.at("encoder_attention_heads").get<int>();
  m.decoder_heads = c.at("decoder_attention_heads").get<int>();
  m.encoder_ffn_dim = c.at("encoder_ffn_dim").get<int>();
  m.decoder_ffn_dim = c.at("decoder_ffn_dim").get<int>();
  auto activation = ParseActivation(c.at("activation").get<std::string>());
  if (!activation.ok()) return activation.status();
  m.activation = *activation;
  m.normalize_before = c.value("normalize_before", false);
  m.layernorm_embedding = c.value("layernorm_embedding", false);
  m.final_layer_norm = c.value("final_layer_norm", false);
  m.scale_embedding = c.value("scale_embedding", false);
  m.layer_norm_eps = c.value("layer_norm_eps", 1e-5f);
  m.max_positions = c.at("max_position_embeddings").get<int>();
  m.source_vocab_size = c.at("source_vocab_size").get<int>();
  m.target_vocab_size = c.at("target_vocab_size").get<int>();
  m.shared_vocab = c.value("shared_vocab", true);
  m.pad_id = c.at("pad_id").get<int>();
  m.eos_id = c.at("eos_id").get<int>();
  m.unk_id = c.at("unk_id").get<int>();
  m.decoder_start_id = c.at("decoder_start_id").get<int>();
  for (const auto& seq : c.value("bad_words_ids", nlohmann::json::array())) {
    if (seq.size() != 1) {
      return absl::UnimplementedError(absl::StrCat(
          "config.bad_words_ids holds the multi-token sequence ", seq.dump(),
          "; only single tokens are supported"));
    }
    m.banned_ids.push_back(seq[0].get<int>());
  }
  for (auto [key, value] : {std::pair{"d_model", m.d_model}, {"encoder_layers", m.encoder_layers},
                            {"decoder_layers", m.decoder_layers},
                            {"encoder_attention_heads", m.encoder_heads},
                            {"decoder_attention_heads", m.decoder_heads},
                            {"encoder_ffn_dim", m.encoder_ffn_dim},
                            {"decoder_ffn_dim", m.decoder_ffn_dim},
                            {"max_position_embeddings", m.max_positions},
                            {"source_vocab_size", m.source_vocab_size},
                            {"target_vocab_size", m.target_vocab_size}}) {
    if (absl::Status s = CheckPositive(key, value); !s.ok()) return s;
  }
  if (m.d_model % m.encoder_heads != 0 || m.d_model % m.decoder_heads != 0) {
    return absl::InvalidArgumentError("config.d_model is not a multiple of the number of heads");
  }
  for (auto [key, id] : {std::pair{"pad_id", m.pad_id}, {"eos_id", m.eos_id},
                         {"decoder_start_id", m.decoder_start_id}}) {
    if (id < 0 || id >= m.target_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("config.", key, " ", id,
                                                     " is outside the target vocabulary"));
    }
  }
  for (int id : m.banned_ids) {
    if (id < 0 || id >= m.target_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("config.bad_words_ids holds ", id,
                                                     ", outside the target vocabulary"));
    }
  }
  if (m.unk_id < 0 || m.unk_id >= m.source_vocab_size) {
    return absl::InvalidArgumentError("config.unk_id is outside the source vocabulary");
  }
  GenerationDefaults& g = info.generation;
  const nlohmann::json gen = header.value("generation", nlohmann::json::object());
  g.num_beams = gen.value("num_beams", 4);
  g.max_length = gen.value("max_length", m.max_positions);
  g.length_penalty = gen.value("length_penalty", 1.0f);
  g.early_stopping = gen.value("early_stopping", false);
  g.forced_eos_id = gen.contains("forced_eos_token_id") && !gen["forced_eos_token_id"].is_null()
                        ? gen["forced_eos_token_id"].get<int>()
                        : -1;
  if (g.num_beams < 1) g.num_beams = 1;
  if (g.max_length < 2) g.max_length = 2;
  return info;
}

}  // namespace

absl::StatusOr<ModelInfo> ParseModelInfo(const nlohmann::json& header) {
  try {
    return Parse(header);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model header: missing or mistyped config key: ", e.what()));
  }
}

}  // namespace glossa
