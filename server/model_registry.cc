#include "server/model_registry.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/status_util.h"

namespace glossa::server {

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(
    const std::vector<std::string>& specs, const EngineOptions& options,
    const ModelOptions& model_options) {
  auto registry = std::make_unique<ModelRegistry>();
  std::map<std::string, std::shared_ptr<const Model>> by_path;  // one mapping per file
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    std::string name, path;
    if (eq == std::string::npos) {
      path = spec;
      name = path.substr(path.rfind('/') + 1);
      if (name.size() > 7 && name.substr(name.size() - 7) == ".glossa") name.resize(name.size() - 7);
    } else {
      name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
    }
    if (name.empty() || path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model '", spec, "': expected NAME=PATH with both parts"));
    }
    if (registry->models_.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--model: the name '", name,
                                                     "' is given twice"));
    }
    std::shared_ptr<const Model>& model = by_path[path];
    if (model == nullptr) {
      auto loaded = Model::Load(path, model_options);
      if (!loaded.ok()) return loaded.status();
      model = *std::move(loaded);
    }
    auto entry = std::make_unique<LoadedModel>();
    entry->name = name;
    entry->path = path;
    entry->model = model;
    entry->engine = std::make_unique<Engine>(entry->model, options);
    registry->models_.emplace(name, std::move(entry));
  }
  if (registry->models_.empty()) return absl::InvalidArgumentError("no model to serve");
  return registry;
}

std::string ModelRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : models_) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<LoadedModel*> ModelRegistry::Find(const std::string& name) const {
  if (name.empty()) {
    if (models_.size() == 1) return models_.begin()->second.get();
    return absl::InvalidArgumentError(
        absl::StrCat("this server holds several models (", Names(), "): set TranslateRequest.model"));
  }
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no model named ", QuoteForMessage(name), "; this server holds: ", Names()));
  }
  return it->second.get();
}

void ModelRegistry::Shutdown(absl::Time deadline) {
  std::vector<std::thread> threads;
  for (auto& [name, entry] : models_) {
    Engine* engine = entry->engine.get();
    threads.emplace_back([engine, deadline] { engine->Shutdown(deadline); });
  }
  for (auto& t : threads) t.join();
}

}  // namespace glossa::server
