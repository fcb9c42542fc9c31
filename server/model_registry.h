// The models a server holds: each a mapped model file and the engine that runs it.
#ifndef GLOSSA_SERVER_MODEL_REGISTRY_H_
#define GLOSSA_SERVER_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace glossa::server {

struct LoadedModel {
  std::string name;
  std::string path;
  std::shared_ptr<const Model> model;
  std::unique_ptr<Engine> engine;
};

class ModelRegistry {
 public:
  // specs: "NAME=PATH" (or a bare PATH, named after the file). Fails on the first model that
  // cannot be loaded, or on a repeated name.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(const std::vector<std::string>& specs,
                                                             const EngineOptions& options,
                                                             const ModelOptions& model_options = {});

  // The model a request names. An empty name picks the only model; with several,
  // INVALID_ARGUMENT. An unknown name: NOT_FOUND listing the loaded names.
  absl::StatusOr<LoadedModel*> Find(const std::string& name) const;
  const std::map<std::string, std::unique_ptr<LoadedModel>>& models() const { return models_; }
  std::string Names() const;
  // Shuts every engine down (in parallel), finishing work until the deadline.
  void Shutdown(absl::Time deadline);

 private:
  std::map<std::string, std::unique_ptr<LoadedModel>> models_;
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_MODEL_REGISTRY_H_
