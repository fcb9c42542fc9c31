#include "engine/model.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/threads.h"

namespace glossa {

namespace {

// The compute types for a file and the caller's options (see ModelOptions).
absl::StatusOr<WeightOptions> ChooseComputeTypes(const ModelFile& file, const std::string& dtype,
                                                 const ModelOptions& options) {
  const std::string& name = options.compute_type.empty() ? dtype : options.compute_type;
  WeightOptions w;
  if (!ParseComputeType(name, &w.compute)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute type '", name, "' is not one of ", ComputeTypeNames(),
        options.compute_type.empty() ? absl::StrCat(" (the dtype of ", file.path(), ")") : ""));
  }
  w.output_compute = w.compute;
  if (options.compute_type.empty()) {  // as stored
    auto head = file.Tensor("lm_head.weight");
    if (head.ok() && (*head)->dtype == DType::kFloat32) w.output_compute = ComputeType::kFloat32;
  }
  if (options.float32_output_layer) w.output_compute = ComputeType::kFloat32;
  w.argmax_screen = options.argmax_screen;
  return w;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& path,
                                                         const ModelOptions& options) {
  std::shared_ptr<Model> m(new Model());
  GLOSSA_ASSIGN_OR_RETURN(m->file_, ModelFile::Open(path, true, options.load_threads));
  auto info = ParseModelInfo(m->file_->header());
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat("model file '", path, "': ", info.status().message()));
  }
  m->info_ = *std::move(info);
  GLOSSA_ASSIGN_OR_RETURN(const WeightOptions compute,
                          ChooseComputeTypes(*m->file_, m->info_.dtype, options));
  // The tokenizer loads on a thread of its own while the weights are copied into oneDNN's
  // layout (SentencePiece builds its tries: ~0.5 s for NLLB's 256k pieces).
  std::future<absl::StatusOr<std::unique_ptr<Tokenizer>>> tokenizer = std::async(
      std::launch::async, [&m] { return Tokenizer::Load(*m->file_, m->info_.config); });
  const int caller_threads = ComputeThreads();
  if (options.load_threads > 0) SetComputeThreads(options.load_threads);
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights =
      LoadWeights(*m->file_, m->info_.config, compute);
  SetComputeThreads(caller_threads);
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded_tokenizer = tokenizer.get();
  GLOSSA_ASSIGN_OR_RETURN(m->weights_, std::move(weights));
  GLOSSA_ASSIGN_OR_RETURN(m->tokenizer_, std::move(loaded_tokenizer));
  m->info_.dtype = ComputeTypeName(compute.compute);
  m->encoder_ = std::make_unique<Encoder>(m->info_.config, *m->weights_);
  m->decoder_ = std::make_unique<Decoder>(m->info_.config, *m->weights_);
  // The load read the file through its mapping; from here on only ModelFile::CopyOut reads it.
  GLOSSA_RETURN_IF_ERROR(m->file_->CheckUnchanged());
  m->file_->Unmap();
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace glossa
