#include "model/config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

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

// An int field of the header. nlohmann's get<int>() wraps integers modulo 2^32 (d_model
// 2^32 + 512 read as 512) and casts fractions; both are refused here instead.
int GetInt(const nlohmann::json& value) {
  if (!value.is_number_integer()) {
    throw std::out_of_range(absl::StrCat(value.dump(), " is not a whole number"));
  }
  const int64_t v = value.is_number_unsigned()
                        ? static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), INT64_MAX))
                        : value.get<int64_t>();
  if (v < INT_MIN || v > INT_MAX) {
    throw std::out_of_range(absl::StrCat(v, " is outside the range of int"));
  }
  return static_cast<int>(v);
}

absl::Status CheckPositive(const char* key, int value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("config.", key, " must be positive, got ", value));
}

// header.tokenizer.languages: [{code, token, id, iso639_1, iso639_3}], multilingual models only.
absl::Status ParseLanguages(const nlohmann::json& header, const ModelConfig& m,
                            std::vector<LanguageCode>& out) {
  const nlohmann::json tokenizer = header.value("tokenizer", nlohmann::json::object());
  if (!tokenizer.is_object() || !tokenizer.contains("languages")) return absl::OkStatus();
  for (const nlohmann::json& l : tokenizer.at("languages")) {
    LanguageCode code;
    code.code = l.at("code").get<std::string>();
    code.token = l.at("token").get<std::string>();
    code.id = GetInt(l.at("id"));
    code.iso639_1 = l.value("iso639_1", "");
    code.iso639_3 = l.value("iso639_3", "");
    if (code.code.empty() || code.id < 0 || code.id >= m.source_vocab_size ||
        code.id >= m.target_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.languages: language '", code.code,
                                                     "' has id ", code.id,
                                                     ", outside the vocabulary"));
    }
    out.push_back(std::move(code));
  }
  return absl::OkStatus();
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
  if (m.architecture != "marian" && m.architecture != "m2m_100" && m.architecture != "mbart") {
    return absl::UnimplementedError(absl::StrCat("config.architecture '", m.architecture,
                                                 "' is not supported (marian, m2m_100, mbart)"));
  }
  m.d_model = GetInt(c.at("d_model"));
  m.encoder_layers = GetInt(c.at("encoder_layers"));
  m.decoder_layers = GetInt(c.at("decoder_layers"));
  m.encoder_heads = GetInt(c.at("encoder_attention_heads"));
  m.decoder_heads = GetInt(c.at("decoder_attention_heads"));
  m.encoder_ffn_dim = GetInt(c.at("encoder_ffn_dim"));
  m.decoder_ffn_dim = GetInt(c.at("decoder_ffn_dim"));
  auto activation = ParseActivation(c.at("activation").get<std::string>());
  if (!activation.ok()) return activation.status();
  m.activation = *activation;
  m.normalize_before = c.value("normalize_before", false);
  m.layernorm_embedding = c.value("layernorm_embedding", false);
  m.final_layer_norm = c.value("final_layer_norm", false);
  m.scale_embedding = c.value("scale_embedding", false);
  m.layer_norm_eps = c.value("layer_norm_eps", 1e-5f);
  m.max_positions = GetInt(c.at("max_position_embeddings"));
  m.position_offset = c.contains("position_offset") ? GetInt(c["position_offset"]) : 0;
  m.positions_from_pad = c.value("positions_from_pad", false);
  m.source_vocab_size = GetInt(c.at("source_vocab_size"));
  m.target_vocab_size = GetInt(c.at("target_vocab_size"));
  m.shared_vocab = c.value("shared_vocab", true);
  m.pad_id = GetInt(c.at("pad_id"));
  m.eos_id = GetInt(c.at("eos_id"));
  m.unk_id = GetInt(c.at("unk_id"));
  m.decoder_start_id = GetInt(c.at("decoder_start_id"));
  for (const auto& seq : c.value("bad_words_ids", nlohmann::json::array())) {
    if (seq.size() != 1) {
      return absl::UnimplementedError(absl::StrCat(
          "config.bad_words_ids holds the multi-token sequence ", seq.dump(),
          "; only single tokens are supported"));
    }
    m.banned_ids.push_back(GetInt(seq[0]));
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
  if (m.position_offset < 0 || m.position_offset > 1024 ||
      (m.positions_from_pad && m.pad_id >= m.position_offset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.position_offset ", m.position_offset,
        " is outside [0, 1024] (or not past pad_id with positions_from_pad)"));
  }
  if (m.unk_id < 0 || m.unk_id >= m.source_vocab_size) {
    return absl::InvalidArgumentError("config.unk_id is outside the source vocabulary");
  }
  GLOSSA_RETURN_IF_ERROR(ParseLanguages(header, m, info.languages));
  GenerationDefaults& g = info.generation;
  const nlohmann::json gen = header.value("generation", nlohmann::json::object());
  const auto int_or = [&gen](const char* key, int fallback) {
    return gen.contains(key) && !gen[key].is_null() ? GetInt(gen[key]) : fallback;
  };
  g.num_beams = int_or("num_beams", 4);
  g.max_length = int_or("max_length", m.max_positions);
  g.length_penalty = gen.value("length_penalty", 1.0f);
  g.early_stopping = gen.value("early_stopping", false);
  g.forced_eos_id = int_or("forced_eos_token_id", -1);
  // Found by review: the decoder writes to row[forced_eos_id], so an id past the vocabulary was
  // an out-of-bounds write on the last step.
  if (g.forced_eos_id < -1 || g.forced_eos_id >= m.target_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("generation.forced_eos_token_id ",
                                                   g.forced_eos_id,
                                                   " is outside the target vocabulary"));
  }
  if (!(std::fabs(g.length_penalty) <= 10.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("generation.length_penalty ", g.length_penalty,
                                                   " is outside [-10, 10]"));
  }
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
  } catch (const std::out_of_range& e) {
    return absl::InvalidArgumentError(absl::StrCat("model header: config value ", e.what()));
  }
}

}  // namespace glossa
