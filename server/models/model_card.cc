#include "server/models/model_card.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "model/model_file.h"
#include "ops/linear.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

// Bytes of one weight in a storage or compute type (scales and biases aside).
double WeightBytes(const std::string& type) {
  if (type == "int8" || type == "int8_fast") return 1.0;
  if (type == "bfloat16") return 2.0;
  return 4.0;
}

// The file's size in the compute type the spec loads it as.
int64_t EstimateBytes(const ModelSpec& spec, const FileStamp& stamp, const std::string& stored) {
  const std::string& compute =
      spec.model_options.compute_type.empty() ? stored : spec.model_options.compute_type;
  return static_cast<int64_t>(static_cast<double>(stamp.size) * WeightBytes(compute) /
                              WeightBytes(stored));
}

}  // namespace

int64_t OutputLayerExtras(const ModelCard& card) {
  const ModelConfig& c = card.info.config;
  const bool float32_output =
      card.info.dtype == "float32" || card.spec.model_options.float32_output_layer;
  if (!card.spec.model_options.argmax_screen || !float32_output) return 0;
  return int64_t{c.target_vocab_size} * c.d_model * 5;
}

absl::StatusOr<std::shared_ptr<const ModelCard>> ReadModelCard(const ModelSpec& spec) {
  auto card = std::make_shared<ModelCard>();
  card->name = spec.name;
  card->spec = spec;
  card->stamp = StampFile(spec.path);
  // The checksums are checked when the model loads; reading every tensor now would be slow.
  auto file = ModelFile::Open(spec.path, /*verify_checksums=*/false);
  if (!file.ok()) return file.status();
  auto info = ParseModelInfo((*file)->header());
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat("model file '", spec.path,
                                                           "': ", info.status().message()));
  }
  card->info = *std::move(info);
  auto tokenizer = Tokenizer::Load(**file, card->info.config);
  if (!tokenizer.ok()) return tokenizer.status();
  card->target_prefix_tokens = (*tokenizer)->target_prefix_tokens();
  card->estimated_bytes = EstimateBytes(spec, card->stamp, card->info.dtype);
  if (!spec.model_options.compute_type.empty()) {
    ComputeType type;
    if (!ParseComputeType(spec.model_options.compute_type, &type)) {
      return absl::InvalidArgumentError(absl::StrCat("compute type '",
                                                     spec.model_options.compute_type,
                                                     "' is not one of ", ComputeTypeNames()));
    }
    card->info.dtype = spec.model_options.compute_type;
  }
  (*file)->DropAllPages();  // the vocabulary and tokenizer pages read above
  return std::shared_ptr<const ModelCard>(std::move(card));
}

std::shared_ptr<const ModelCard> CardOf(const ModelSpec& spec, const FileStamp& stamp,
                                        const Model& model) {
  auto card = std::make_shared<ModelCard>();
  card->name = spec.name;
  card->spec = spec;
  card->stamp = stamp;
  card->info = model.info();
  card->target_prefix_tokens = model.tokenizer().target_prefix_tokens();
  // The file's dtype is not kept once loaded: estimate from the compute type in use, the file
  // stored as float32 unless it says otherwise.
  auto file_dtype = model.file().header().value("dtype", std::string("float32"));
  card->estimated_bytes = EstimateBytes(spec, stamp, file_dtype);
  return card;
}

}  // namespace glossa::server
