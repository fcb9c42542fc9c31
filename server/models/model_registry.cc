#include "server/models/model_registry.h"

#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/status_util.h"

namespace glossa::server {
namespace {

std::atomic<uint64_t> next_generation{1};

void Log(const std::string& line) {
  std::fprintf(stderr, "glossa-server: %s\n", line.c_str());
  std::fflush(stderr);
}

// Models with the same key share one mapping (and its converted weights).
std::string MappingKey(const ModelSpec& spec) {
  return absl::StrCat(spec.path, std::string(1, '\0'), spec.model_options.compute_type,
                      spec.model_options.float32_output_layer ? "/f32out" : "",
                      spec.model_options.argmax_screen ? "" : "/noscreen");
}

std::string Describe(const LoadedModel& m) {
  const ModelInfo& info = m.model->info();
  return absl::StrCat("from ", m.path, " (", info.config.architecture, ", ", info.dtype, ", ",
                      m.spec.engine_options.workers, " workers)");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(
    const std::vector<std::string>& flags, const EngineOptions& options,
    const ModelOptions& model_options) {
  ModelDefaults defaults;
  defaults.engine_options = options;
  defaults.model_options = model_options;
  std::vector<ModelSpec> specs;
  for (const std::string& flag : flags) {
    auto spec = ParseModelFlag(flag, defaults);
    if (!spec.ok()) return spec.status();
    specs.push_back(*std::move(spec));
  }
  return Load(specs);
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(
    const std::vector<ModelSpec>& specs) {
  auto registry = std::make_unique<ModelRegistry>();
  std::map<std::string, std::shared_ptr<const Model>> by_key;  // one mapping per file
  for (const ModelSpec& spec : specs) {
    {
      absl::MutexLock lock(&registry->mu_);
      if (registry->models_.count(spec.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--model: the name '", spec.name, "' is given twice"));
      }
    }
    auto entry = std::make_unique<LoadedModel>();
    entry->stamp = StampFile(spec.path);
    std::shared_ptr<const Model>& model = by_key[MappingKey(spec)];
    if (model == nullptr) {
      auto loaded = Model::Load(spec.path, spec.model_options);
      if (!loaded.ok()) return loaded.status();
      model = *std::move(loaded);
    }
    entry->name = spec.name;
    entry->path = spec.path;
    entry->spec = spec;
    entry->model = model;
    entry->engine = std::make_unique<Engine>(entry->model, spec.engine_options);
    entry->generation = next_generation.fetch_add(1);
    std::shared_ptr<LoadedModel> owned = registry->Own(std::move(entry));
    absl::MutexLock lock(&registry->mu_);
    registry->models_.emplace(spec.name, std::move(owned));
  }
  {
    absl::MutexLock lock(&registry->mu_);
    if (registry->models_.empty()) return absl::InvalidArgumentError("no model to serve");
  }
  return registry;
}

ModelRegistry::~ModelRegistry() {
  Shutdown(absl::Now());
  std::vector<LoadedModel*> left;
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    left.swap(released_);
  }
  for (LoadedModel* m : left) delete m;
}

std::shared_ptr<LoadedModel> ModelRegistry::Own(std::unique_ptr<LoadedModel> model) {
  return std::shared_ptr<LoadedModel>(model.release(), [this](LoadedModel* m) { Released(m); });
}

// The last reference to a model is gone (it is out of the set: the set holds one while it is
// in). Freeing it shuts its engine down, which joins its workers: not on the thread that dropped
// the reference, which may be one of those workers (a job's callback held it).
void ModelRegistry::Released(LoadedModel* model) {
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    // After Shutdown began the reaper is gone: Shutdown or the destructor frees it.
    if (reaper_running_ || stopping_) {
      released_.push_back(model);
      reaper_wake_.notify_one();
      return;
    }
  }
  delete model;  // not reached in practice: a model leaves the set by retiring or by Shutdown
}

void ModelRegistry::RetireLocked(const std::shared_ptr<LoadedModel>& model) {
  std::lock_guard<std::mutex> lock(reaper_mu_);
  retiring_[model.get()] = Retiring{absl::Now(), false};
  if (!reaper_running_ && !stopping_) {
    reaper_running_ = true;
    reaper_ = std::thread([this] { ReaperLoop(); });
  }
}

void ModelRegistry::ReaperLoop() {
  std::unique_lock<std::mutex> lock(reaper_mu_);
  while (!stopping_) {
    // Woken by a release or by Shutdown; every 200 ms anyway, for the drain timeout.
    reaper_wake_.wait_for(lock, std::chrono::milliseconds(200),
                          [this] { return stopping_ || !released_.empty(); });
    if (stopping_) break;
    std::vector<LoadedModel*> released;
    released.swap(released_);
    for (LoadedModel* m : released) retiring_.erase(m);
    std::vector<LoadedModel*> overdue;  // still referenced past the drain timeout
    const absl::Time now = absl::Now();
    for (auto& [m, r] : retiring_) {
      if (!r.forced && now - r.since > drain_timeout_) {
        r.forced = true;
        overdue.push_back(m);
      }
    }
    lock.unlock();
    for (LoadedModel* m : overdue) {
      Log(absl::StrCat("model ", m->name, " (removed or replaced): requests still running after ",
                       absl::FormatDuration(drain_timeout_), "; ending them"));
      m->engine->Shutdown(absl::Now());  // only the reaper frees m: still valid
    }
    for (LoadedModel* m : released) {
      m->engine->Shutdown(absl::Now());  // nothing is in flight: nobody holds the model
      Log(absl::StrCat("model ", m->name, " (", m->path, "): unloaded, its requests done"));
      delete m;
    }
    lock.lock();
  }
}

void ModelRegistry::SetServingCallback(ServingCallback callback) {
  serving_callback_ = std::move(callback);
}

void ModelRegistry::Notify(const std::string& name, bool serving) const {
  if (serving_callback_) serving_callback_(name, serving);
}

std::map<std::string, std::shared_ptr<LoadedModel>> ModelRegistry::models() const {
  absl::ReaderMutexLock lock(&mu_);
  return models_;
}

std::string ModelRegistry::Names() const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, entry] : models_) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelRegistry::Find(const std::string& name) const {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (name.empty()) {
      if (models_.size() == 1) return models_.begin()->second;
    } else if (auto it = models_.find(name); it != models_.end()) {
      return it->second;
    }
  }
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("this server holds several models (", Names(),
                                                   "): set TranslateRequest.model"));
  }
  return absl::NotFoundError(
      absl::StrCat("no model named ", QuoteForMessage(name), "; this server holds: ", Names()));
}

ModelRegistry::ApplyResult ModelRegistry::Apply(const std::vector<ModelSpec>& specs) {
  absl::MutexLock apply_lock(&apply_mu_);
  ApplyResult result;
  // What is served now: also where an unchanged file's mapping is found again.
  ModelMap current = models();
  std::set<std::string> wanted;
  for (const ModelSpec& spec : specs) wanted.insert(spec.name);
  // Removed names first: new requests get NOT_FOUND from now on.
  if (!RemoveUnwanted(current, wanted, &result)) return result;
  std::vector<std::shared_ptr<LoadedModel>> loaded_now;  // this Apply's loads, for sharing
  for (const ModelSpec& spec : specs) {
    if (!LoadOrReplace(spec, current, &loaded_now, &result)) return result;
  }
  current.clear();  // outside the locks: may hand models to the reaper
  return result;
}

bool ModelRegistry::RemoveUnwanted(const ModelMap& current, const std::set<std::string>& wanted,
                                   ApplyResult* result) {
  for (const auto& [name, entry] : current) {
    if (wanted.count(name)) continue;
    std::shared_ptr<LoadedModel> out;
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return false;
      auto it = models_.find(name);
      if (it == models_.end()) continue;
      out = std::move(it->second);
      models_.erase(it);
      RetireLocked(out);
    }
    Notify(name, false);
    Log(absl::StrCat("model ", name,
                     ": removed (in-flight requests finish; new ones get "
                     "NOT_FOUND)"));
    result->removed.push_back(name);
  }
  return true;
}

namespace {

// A mapping of the same unchanged file with the same options, loaded now or served already.
std::shared_ptr<const Model> SharedMapping(
    const ModelSpec& spec, const FileStamp& stamp,
    const std::vector<std::shared_ptr<LoadedModel>>& loaded_now,
    const std::map<std::string, std::shared_ptr<LoadedModel>>& current) {
  std::shared_ptr<const Model> model;
  for (const auto& m : loaded_now) {
    if (MappingKey(m->spec) == MappingKey(spec) && m->stamp == stamp) model = m->model;
  }
  for (const auto& [name, m] : current) {
    if (model == nullptr && MappingKey(m->spec) == MappingKey(spec) && m->stamp == stamp) {
      model = m->model;
    }
  }
  return model;
}

}  // namespace

bool ModelRegistry::LoadOrReplace(const ModelSpec& spec, const ModelMap& current,
                                  std::vector<std::shared_ptr<LoadedModel>>* loaded_now,
                                  ApplyResult* result) {
  const FileStamp stamp = StampFile(spec.path);
  auto it = current.find(spec.name);
  const bool is_new = it == current.end();
  if (!is_new && SameLoad(it->second->spec, spec) && it->second->stamp == stamp) return true;
  if (is_new) Notify(spec.name, false);  // NOT_SERVING until it is ready
  std::shared_ptr<const Model> model = SharedMapping(spec, stamp, *loaded_now, current);
  const absl::Time start = absl::Now();
  if (model == nullptr) {
    auto load = Model::Load(spec.path, spec.model_options);
    if (!load.ok()) {
      Log(absl::StrCat("model ", spec.name, ": cannot load ", spec.path, ": ",
                       load.status().message(),
                       is_new ? " (not served)" : " (the loaded model keeps serving)"));
      result->failed.push_back(spec.name);
      absl::MutexLock lock(&mu_);
      ++stats_.load_failures[spec.name];
      return true;
    }
    model = *std::move(load);
  }
  auto entry = std::make_unique<LoadedModel>();
  entry->name = spec.name;
  entry->path = spec.path;
  entry->spec = spec;
  entry->stamp = stamp;
  entry->model = std::move(model);
  entry->engine = std::make_unique<Engine>(entry->model, spec.engine_options);
  entry->generation = next_generation.fetch_add(1);
  std::shared_ptr<LoadedModel> fresh = Own(std::move(entry));
  const std::string description = Describe(*fresh);
  loaded_now->push_back(fresh);
  std::shared_ptr<LoadedModel> old;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return false;  // `fresh` is freed when dropped (Released)
    std::shared_ptr<LoadedModel>& slot = models_[spec.name];
    old = std::move(slot);
    slot = fresh;
    if (old != nullptr) RetireLocked(old);
  }
  old.reset();
  Notify(spec.name, true);
  Log(absl::StrCat("model ", spec.name, is_new ? ": added " : ": replaced, now ", description,
                   " in ", absl::ToInt64Milliseconds(absl::Now() - start), " ms"));
  (is_new ? result->added : result->replaced).push_back(spec.name);
  return true;
}

void ModelRegistry::RecordReload(bool ok) {
  absl::MutexLock lock(&mu_);
  ++(ok ? stats_.reloads_ok : stats_.reloads_failed);
  stats_.last_reload_ok = ok;
}

ModelRegistry::ReloadStats ModelRegistry::reload_stats() const {
  ReloadStats stats;
  {
    absl::ReaderMutexLock lock(&mu_);
    stats = stats_;
  }
  std::lock_guard<std::mutex> lock(reaper_mu_);
  stats.retiring = static_cast<int64_t>(retiring_.size());
  return stats;
}

void ModelRegistry::Shutdown(absl::Time deadline) {
  std::map<std::string, std::shared_ptr<LoadedModel>> models;
  std::vector<Engine*> engines;
  std::thread reaper;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;  // Apply retires nothing from now on
  }
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    stopping_ = true;
    reaper = std::move(reaper_);
    reaper_wake_.notify_one();
  }
  if (reaper.joinable()) reaper.join();
  {
    absl::MutexLock lock(&mu_);
    models.swap(models_);
  }
  for (auto& [name, entry] : models) engines.push_back(entry->engine.get());
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    reaper_running_ = false;
    // Retiring models are alive until released (nothing else frees them).
    for (auto& [m, r] : retiring_) engines.push_back(m->engine.get());
  }
  std::vector<std::thread> threads;
  for (Engine* engine : engines) {
    threads.emplace_back([engine, deadline] { engine->Shutdown(deadline); });
  }
  for (auto& t : threads) t.join();
  // Models released after the reaper stopped were queued; free them (engines are shut down).
  std::vector<LoadedModel*> released;
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    released.swap(released_);
    for (LoadedModel* m : released) retiring_.erase(m);
  }
  for (LoadedModel* m : released) delete m;
  models.clear();  // references still held elsewhere free their models when dropped
}

}  // namespace glossa::server
