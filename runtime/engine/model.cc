#include "engine/model.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace glossa {

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& path) {
  std::shared_ptr<Model> m(new Model());
  GLOSSA_ASSIGN_OR_RETURN(m->file_, ModelFile::Open(path));
  auto info = ParseModelInfo(m->file_->header());
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat("model file '", path, "': ", info.status().message()));
  }
  m->info_ = *std::move(info);
  GLOSSA_ASSIGN_OR_RETURN(m->weights_, LoadWeights(*m->file_, m->info_.config));
  GLOSSA_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Load(*m->file_, m->info_.config));
  m->encoder_ = std::make_unique<Encoder>(m->info_.config, *m->weights_);
  m->decoder_ = std::make_unique<Decoder>(m->info_.config, *m->weights_);
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace glossa
