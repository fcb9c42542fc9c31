// The models a server holds: each a model loaded from its file and the engine that runs it, and
// the models it may load (catalogued: --models_dir, `dir=` in --model_config), known by their cards
// (model_card.h) until their first request loads them.
//
// Under a memory budget (--max_loaded_mb), loading a model first unloads the least recently used
// others until the estimated resident total fits: idle models first; busy ones only when no idle
// model has made room within 5 s (they stop taking requests and drain, see retire below; the
// load does not wait for them, as their holders may be waiting for a load themselves). A model
// bigger than the whole budget is refused (RESOURCE_EXHAUSTED). One load runs at a time; requests for loaded models
// never wait for it.
//
// The set may change while the server runs (Apply, driven by LiveModels from --model_config):
// a request holds its model through the shared_ptr that Find returns, so a model removed or
// replaced meanwhile finishes the requests that found it. A model out of the set is "retiring":
// once its last reference is gone, a background thread shuts its engine down (nothing is in
// flight then) and frees it; after the drain timeout its engine is shut down even while
// references remain (their jobs end with UNAVAILABLE).
#ifndef GLOSSA_SERVER_MODELS_MODEL_REGISTRY_H_
#define GLOSSA_SERVER_MODELS_MODEL_REGISTRY_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "server/models/model_card.h"
#include "server/models/model_config.h"

namespace glossa::server {

struct LoadedModel {
  std::string name;
  std::string path;
  std::shared_ptr<const Model> model;
  std::unique_ptr<Engine> engine;
  // Unique to this load within the process: a model replaced under the same name gets a new
  // one (the result cache keys by it, so the old model's translations are not served).
  uint64_t generation = 0;
  ModelSpec spec;   // what it was loaded from
  FileStamp stamp;  // the file as it was just before it was loaded
  std::shared_ptr<const ModelCard> card;
  // The registry's use counter at its last Find, and at the one before (0: none).
  std::atomic<int64_t> last_used{0};
  std::atomic<int64_t> used_before{0};
  void MarkUsed(int64_t use) { used_before.store(last_used.exchange(use)); }
  // Smaller is unloaded first: least recently used by its use before last, then by its last use
  // (LRU-2). A model used once (a request for a rare pair) goes before one in steady use, even
  // when the steady one's last request began a moment earlier: with plain LRU, one-off requests
  // to cold models, back to back, unloaded a model with requests every few milliseconds.
  std::pair<int64_t, int64_t> Recency() const { return {used_before.load(), last_used.load()}; }
  // The process's RSS growth while it loaded (weights, tokenizer, engine), 0 when not measured
  // (a mapping shared with another name). Loads run one at a time, so little else is in it.
  int64_t load_bytes = 0;
  // Its share of the budget: the larger of the card's estimate and load_bytes, what its first
  // requests add to the output layer (OutputLayerExtras), and the KV cache its engine holds.
  int64_t ResidentBytes() const;
};

enum class ModelState { kNotLoaded, kLoading, kLoaded };
const char* ModelStateName(ModelState state);  // "not_loaded", "loading", "loaded"

struct CatalogueEntry {
  std::shared_ptr<const ModelCard> card;
  ModelState state = ModelState::kNotLoaded;
  int64_t resident_bytes = 0;  // 0 unless loaded
};
using CardMap = std::map<std::string, std::shared_ptr<const ModelCard>>;

class ModelRegistry {
 public:
  // specs: "NAME=PATH" (or a bare PATH, named after the file). Fails on the first model that
  // cannot be loaded, or on a repeated name.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(
      const std::vector<std::string>& specs, const EngineOptions& options,
      const ModelOptions& model_options = {});
  // The same from resolved specs (--model flags or a --model_config file).
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(const std::vector<ModelSpec>& specs);

  ModelRegistry() = default;
  ~ModelRegistry();  // Shutdown(now) unless done
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // The model a request names, loaded first when it is catalogued and not loaded (the caller
  // waits). An empty name picks the only model; with several, INVALID_ARGUMENT. An unknown
  // name: NOT_FOUND listing the names. The model stays alive (and its engine running) while the
  // caller holds it.
  absl::StatusOr<std::shared_ptr<LoadedModel>> Find(const std::string& name) const;
  // The models loaded now (a snapshot).
  std::map<std::string, std::shared_ptr<LoadedModel>> models() const;
  // Every model served, loaded or not: what routing and listings see.
  CardMap cards() const;
  std::map<std::string, CatalogueEntry> catalogue() const;
  std::string Names() const;  // every model's name
  bool IsLoaded(const std::string& name) const;  // Find would not wait for a load
  bool AllLoaded() const;                         // no Find waits for a load

  // The memory budget in bytes (0: none). Lowering it unloads models at once.
  void SetBudget(int64_t bytes);
  int64_t budget() const { return budget_bytes_.load(); }
  struct ResidencyStats {
    int64_t loaded = 0, loaded_bytes = 0, catalogued = 0;
    std::map<std::string, uint64_t> loads;    // by reason: start, request, reload
    std::map<std::string, uint64_t> unloads;  // by reason: budget, removed, replaced
    uint64_t waited_for_load = 0;             // Finds that waited for a load
  };
  ResidencyStats residency_stats() const;
  const AtomicHistogram& cold_start_seconds() const { return cold_start_seconds_; }

  // Called (outside the registry's locks, from the thread that changes the set) when a name
  // starts serving (true: loaded, or replaced) or stops (false: removed, or a new name that
  // is loading). Set it before the first Apply.
  using ServingCallback = std::function<void(const std::string& name, bool serving)>;
  void SetServingCallback(ServingCallback callback);
  // How long the requests of a removed or replaced model may run before its engine is shut down
  // anyway (default 30 s).
  void SetDrainTimeout(absl::Duration timeout) { drain_timeout_ = timeout; }

  // Makes the set what `specs` says: removes the names it lacks at once (new requests get
  // NOT_FOUND; in-flight ones finish), loads the names it adds and those whose spec or model
  // file changed, each swapped in once loaded. A model that fails to load changes nothing for
  // its name (the old model, if any, keeps serving). Logs each change on stderr. One Apply at a
  // time (callers are serialized).
  struct ApplyResult {
    std::vector<std::string> added, replaced, removed;
    std::vector<std::string> failed;  // names whose load failed, with the reasons logged
  };
  ApplyResult Apply(const std::vector<ModelSpec>& specs);

  // Reload bookkeeping for the metrics (LiveModels records each reload's outcome).
  void RecordReload(bool ok);
  struct ReloadStats {
    uint64_t reloads_ok = 0, reloads_failed = 0;
    bool last_reload_ok = true;
    std::map<std::string, uint64_t> load_failures;  // by model name
    int64_t retiring = 0;                           // removed or replaced models not yet unloaded
  };
  ReloadStats reload_stats() const;

  // Shuts every engine down (in parallel), finishing work until the deadline.
  void Shutdown(absl::Time deadline);

 private:
  using ModelMap = std::map<std::string, std::shared_ptr<LoadedModel>>;
  // Apply's steps; each returns false once the registry has shut down (Apply stops there).
  bool RemoveUnwanted(const CardMap& current, const std::set<std::string>& wanted,
                      ApplyResult* result);
  bool LoadOrReplace(const ModelSpec& spec, const ModelMap& current,
                     std::vector<std::shared_ptr<LoadedModel>>* loaded_now, ApplyResult* result);
  bool Catalogue(const ModelSpec& spec, ApplyResult* result);
  // The load behind a Find of a catalogued model (load_mu_ held by the caller).
  absl::StatusOr<std::shared_ptr<LoadedModel>> LoadOnDemand(const std::string& name);
  // Unloads least recently used models until `incoming` more bytes fit the budget, and waits a
  // little for them to be freed. RESOURCE_EXHAUSTED when `incoming` exceeds the whole budget.
  absl::Status MakeRoom(const std::string& name, int64_t incoming);
  // The order of one pass of it: least recently used first (LoadedModel::Recency), stopping at a
  // busy model; the same with idle models before busy ones; that with busy models unloaded too.
  enum class VictimOrder { kInOrder, kIdleFirst, kBusyToo };
  // One pass of it: unloads models in `order`; true once it fits.
  bool Unload(const std::string& name, int64_t incoming, int64_t budget, VictimOrder order);
  // Puts a model loaded now into its slot, retiring what was there; false after Shutdown.
  bool Install(const std::string& name, std::shared_ptr<LoadedModel> fresh,
               const char* unload_reason);
  struct Slot {
    std::shared_ptr<const ModelCard> card;
    std::shared_ptr<LoadedModel> loaded;  // null while not loaded
    bool loading = false;
    int64_t known_bytes = 0;  // its ResidentBytes() when it last loaded (0: never loaded)
  };
  struct Retiring {
    absl::Time since;
    bool forced = false;  // its engine was shut down at the drain timeout
    int64_t bytes = 0;    // its share of the budget when it retired
  };
  // Wraps a newly loaded model: its last reference hands it to the reaper.
  std::shared_ptr<LoadedModel> Own(std::unique_ptr<LoadedModel> model);
  void Released(LoadedModel* model);
  // Moves a model taken out of the set (under mu_) into retirement, starting the reaper if it
  // is not running; the caller drops `model` after the lock.
  void RetireLocked(const std::shared_ptr<LoadedModel>& model, const char* reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReaperLoop();
  void Notify(const std::string& name, bool serving) const;

  // The set served; read by every request (Find), hence a reader-writer lock.
  mutable absl::Mutex mu_;
  std::map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  ReloadStats stats_ ABSL_GUARDED_BY(mu_);
  ResidencyStats residency_ ABSL_GUARDED_BY(mu_);

  // Loads on demand, one at a time (Find is const: loading is invisible to its callers, the set
  // of names does not change). Where held with mu_ or reaper_mu_, load_mu_ is first.
  mutable std::mutex load_mu_;
  mutable std::atomic<int64_t> use_counter_{0};
  std::atomic<int64_t> budget_bytes_{0};
  AtomicHistogram cold_start_seconds_{AtomicHistogram::SecondsBounds()};

  // Retirement: the models out of the set and the reaper that frees them. The reaper waits on a
  // std::condition_variable rather than in absl::Mutex::Await: ThreadSanitizer intercepts the
  // pthread calls under std::mutex and std::condition_variable, but cannot see the ordering
  // inside Debian's Abseil, which is built without it. Where both locks are held, mu_ is first.
  mutable std::mutex reaper_mu_;
  std::condition_variable reaper_wake_;        // released_ gained a model, or stopping_ was set
  std::condition_variable freed_;              // a retiring model was freed
  std::map<LoadedModel*, Retiring> retiring_;  // guarded by reaper_mu_
  int64_t retiring_bytes_ = 0;                 // guarded by reaper_mu_: theirs, as counted
  std::vector<LoadedModel*> released_;         // guarded by reaper_mu_: retired, unreferenced
  std::thread reaper_;                         // guarded by reaper_mu_
  bool reaper_running_ = false;                // guarded by reaper_mu_
  bool stopping_ = false;                      // guarded by reaper_mu_; set by Shutdown

  absl::Mutex apply_mu_;  // one Apply at a time
  ServingCallback serving_callback_;
  absl::Duration drain_timeout_ = absl::Seconds(30);
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_MODELS_MODEL_REGISTRY_H_
