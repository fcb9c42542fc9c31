#include "server/models/model_registry.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>
#include <tuple>

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

// A model loaded now, its engine started (not yet owned by the registry).
std::unique_ptr<LoadedModel> NewLoaded(const ModelSpec& spec, const FileStamp& stamp,
                                       std::shared_ptr<const Model> model) {
  auto entry = std::make_unique<LoadedModel>();
  entry->name = spec.name;
  entry->path = spec.path;
  entry->spec = spec;
  entry->stamp = stamp;
  entry->card = CardOf(spec, stamp, *model);
  entry->model = std::move(model);
  entry->engine = std::make_unique<Engine>(entry->model, spec.engine_options);
  entry->generation = next_generation.fetch_add(1);
  return entry;
}

// Model::Load on a thread of its own at nice 10 and on every core but one, so that a load beside
// traffic takes the CPU that the loaded models' workers leave (demo-size loads back to back on 2
// cores: the share of warm requests slower than their p99 alone fell from about a quarter to
// under a tenth when the checksums and layout copies stopped using both cores; the loads took no
// longer). Only the load: the engine starts on the caller's thread, as threads inherit their
// creator's nice value (and an unprivileged one cannot lower it again).
absl::StatusOr<std::shared_ptr<const Model>> LoadAtLowPriority(const ModelSpec& spec) {
  absl::StatusOr<std::shared_ptr<const Model>> model;
  ModelOptions options = spec.model_options;
  options.load_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
  std::thread loader([&] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);  // best effort
    model = Model::Load(spec.path, options);
  });
  loader.join();
  return model;
}

// This process's resident memory, in bytes (0 when /proc cannot be read).
int64_t ProcessRss() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const bool read = std::fscanf(f, "%ld %ld", &pages, &resident) == 2;
  std::fclose(f);
  return read ? int64_t{resident} * sysconf(_SC_PAGESIZE) : 0;
}

std::string Mb(int64_t bytes) { return absl::StrCat((bytes + (1 << 19)) >> 20, " MB"); }

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
  std::set<std::string> names;
  for (const ModelSpec& spec : specs) {
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model: the name '", spec.name, "' is given twice"));
    }
    Slot slot;
    if (spec.on_demand) {
      auto card = ReadModelCard(spec);
      if (!card.ok()) return card.status();
      slot.card = *std::move(card);
    } else {
      const FileStamp stamp = StampFile(spec.path);
      std::shared_ptr<const Model>& model = by_key[MappingKey(spec)];
      const int64_t rss_before = ProcessRss();
      const bool shared = model != nullptr;
      if (model == nullptr) {
        auto loaded = Model::Load(spec.path, spec.model_options);
        if (!loaded.ok()) return loaded.status();
        model = *std::move(loaded);
      }
      slot.loaded = registry->Own(NewLoaded(spec, stamp, model));
      if (!shared) slot.loaded->load_bytes = ProcessRss() - rss_before;
      slot.loaded->MarkUsed(registry->use_counter_.fetch_add(1) + 1);
      slot.card = slot.loaded->card;
    }
    absl::MutexLock lock(&registry->mu_);
    if (slot.loaded != nullptr) ++registry->residency_.loads["start"];
    registry->slots_.emplace(spec.name, std::move(slot));
  }
  if (names.empty()) return absl::InvalidArgumentError("no model to serve");
  return registry;
}

int64_t LoadedModel::ResidentBytes() const {
  return std::max(card->estimated_bytes, load_bytes) + OutputLayerExtras(*card) +
         engine->stats().kv_bytes_allocated;
}

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "loading";
    case ModelState::kLoaded:
      return "loaded";
    default:
      return "not_loaded";
  }
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

void ModelRegistry::RetireLocked(const std::shared_ptr<LoadedModel>& model, const char* reason) {
  ++residency_.unloads[reason];
  const int64_t bytes = model->ResidentBytes();
  std::lock_guard<std::mutex> lock(reaper_mu_);
  retiring_[model.get()] = Retiring{absl::Now(), false, bytes};
  retiring_bytes_ += bytes;
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
      Log(absl::StrCat("model ", m->name, " (unloading): requests still running after ",
                       absl::FormatDuration(drain_timeout_), "; ending them"));
      m->engine->Shutdown(absl::Now());  // only the reaper frees m: still valid
    }
    for (LoadedModel* m : released) {
      m->engine->Shutdown(absl::Now());  // nothing is in flight: nobody holds the model
      Log(absl::StrCat("model ", m->name, " (", m->path, "): unloaded, its requests done"));
      delete m;
    }
    // Hands the freed weights and buffers back to the system: glibc keeps freed blocks below
    // its mmap threshold (malloc_tuning.h raises it) in the heap otherwise.
    if (!released.empty()) malloc_trim(0);
    lock.lock();
    for (LoadedModel* m : released) {
      auto it = retiring_.find(m);
      if (it == retiring_.end()) continue;
      retiring_bytes_ -= it->second.bytes;
      retiring_.erase(it);
    }
    if (!released.empty()) freed_.notify_all();
  }
}

void ModelRegistry::SetServingCallback(ServingCallback callback) {
  serving_callback_ = std::move(callback);
}

void ModelRegistry::Notify(const std::string& name, bool serving) const {
  if (serving_callback_) serving_callback_(name, serving);
}

std::map<std::string, std::shared_ptr<LoadedModel>> ModelRegistry::models() const {
  ModelMap out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, slot] : slots_) {
    if (slot.loaded != nullptr) out.emplace(name, slot.loaded);
  }
  return out;
}

CardMap ModelRegistry::cards() const {
  CardMap out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, slot] : slots_) out.emplace(name, slot.card);
  return out;
}

std::map<std::string, CatalogueEntry> ModelRegistry::catalogue() const {
  std::map<std::string, CatalogueEntry> out;
  ModelMap loaded;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, slot] : slots_) {
      CatalogueEntry& e = out[name];
      e.card = slot.card;
      e.state = slot.loaded != nullptr ? ModelState::kLoaded
                : slot.loading         ? ModelState::kLoading
                                       : ModelState::kNotLoaded;
      if (slot.loaded != nullptr) loaded.emplace(name, slot.loaded);
    }
  }
  for (const auto& [name, model] : loaded) out[name].resident_bytes = model->ResidentBytes();
  return out;
}

std::string ModelRegistry::Names() const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, slot] : slots_) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

bool ModelRegistry::IsLoaded(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = slots_.find(name);
  return it != slots_.end() && it->second.loaded != nullptr;
}

bool ModelRegistry::AllLoaded() const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, slot] : slots_) {
    if (slot.loaded == nullptr) return false;
  }
  return true;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelRegistry::Find(const std::string& name) const {
  std::string found;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = name.empty() && slots_.size() == 1 ? slots_.begin() : slots_.find(name);
    if (it != slots_.end()) {
      if (it->second.loaded != nullptr) {
        it->second.loaded->MarkUsed(use_counter_.fetch_add(1) + 1);
        return it->second.loaded;
      }
      found = it->first;
    }
  }
  if (!found.empty()) {
    // Loading on demand changes none of the names the registry serves, which is all that its
    // const users rely on.
    return const_cast<ModelRegistry*>(this)->LoadOnDemand(found);
  }
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("this server holds several models (", Names(),
                                                   "): set TranslateRequest.model"));
  }
  return absl::NotFoundError(
      absl::StrCat("no model named ", QuoteForMessage(name), "; this server holds: ", Names()));
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelRegistry::LoadOnDemand(const std::string& name) {
  std::unique_lock<std::mutex> load_lock(load_mu_);
  std::shared_ptr<const ModelCard> card;
  int64_t incoming = 0;  // what the load is expected to take: as it took last time, if known
  {
    absl::MutexLock lock(&mu_);
    ++residency_.waited_for_load;
    auto it = slots_.find(name);
    if (it == slots_.end()) {
      return absl::NotFoundError(absl::StrCat("model ", QuoteForMessage(name),
                                              " was removed while its request waited"));
    }
    if (it->second.loaded != nullptr) {  // loaded while this request waited for load_mu_
      it->second.loaded->MarkUsed(use_counter_.fetch_add(1) + 1);
      return it->second.loaded;
    }
    if (shut_down_) return absl::UnavailableError("the server is shutting down");
    card = it->second.card;
    incoming = std::max(ExpectedBytes(*card), it->second.known_bytes);
    it->second.loading = true;
  }
  auto done_loading = [&] {
    absl::MutexLock lock(&mu_);
    if (auto it = slots_.find(name); it != slots_.end()) it->second.loading = false;
  };
  if (absl::Status room = MakeRoom(name, incoming); !room.ok()) {
    done_loading();
    return room;
  }
  const absl::Time start = absl::Now();
  const int64_t rss_before = ProcessRss();
  auto model = LoadAtLowPriority(card->spec);
  if (!model.ok()) {
    done_loading();
    Log(absl::StrCat("model ", name, ": cannot load ", card->spec.path, ": ",
                     model.status().message()));
    absl::MutexLock lock(&mu_);
    ++stats_.load_failures[name];
    return absl::UnavailableError(absl::StrCat("model ", QuoteForMessage(name),
                                               " could not be loaded: ", model.status().message()));
  }
  std::shared_ptr<LoadedModel> fresh =
      Own(NewLoaded(card->spec, StampFile(card->spec.path), *std::move(model)));
  fresh->MarkUsed(use_counter_.fetch_add(1) + 1);
  fresh->load_bytes = ProcessRss() - rss_before;
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  cold_start_seconds_.Observe(seconds);
  done_loading();
  if (!Install(name, fresh, "replaced")) {
    return absl::UnavailableError("the server is shutting down");
  }
  {
    absl::MutexLock lock(&mu_);
    ++residency_.loads["request"];
  }
  Log(absl::StrCat("model ", name, ": loaded on demand ", Describe(*fresh), " in ",
                   absl::ToInt64Milliseconds(absl::Now() - start), " ms (budget ",
                   budget() > 0 ? Mb(budget()) : "none", ")"));
  return fresh;
}

absl::Status ModelRegistry::MakeRoom(const std::string& name, int64_t incoming) {
  const int64_t budget = budget_bytes_.load();
  if (budget <= 0) return absl::OkStatus();
  if (incoming > budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model ", QuoteForMessage(name), " needs about ", Mb(incoming),
        ", more than the whole memory budget (--max_loaded_mb ", budget >> 20, ")"));
  }
  // Busy models (a request holds them) are left alone while kBusyWait lasts: their requests
  // usually end within it, and unloading one now would let a request load it again beside its
  // draining copy. After it, they go too (they finish their requests first): a request may hold
  // one while it waits for this load itself (an "auto" request's next language).
  // Before that, for kReleaseWait, strictly in order: a request that has just answered still
  // holds its model for a moment, and skipping that model for one used since unloaded the model
  // that the traffic was using.
  constexpr absl::Duration kReleaseWait = absl::Milliseconds(50);
  constexpr absl::Duration kBusyWait = absl::Seconds(5);
  const absl::Time start = absl::Now();
  while (true) {
    const absl::Duration waited = absl::Now() - start;
    const VictimOrder order = waited < kReleaseWait ? VictimOrder::kInOrder
                              : waited < kBusyWait  ? VictimOrder::kIdleFirst
                                                    : VictimOrder::kBusyToo;
    if (Unload(name, incoming, budget, order)) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(order == VictimOrder::kInOrder ? 2 : 10));
  }
}

bool ModelRegistry::Unload(const std::string& name, int64_t incoming, int64_t budget,
                           VictimOrder order) {
  struct Victim {
    bool busy;
    std::pair<int64_t, int64_t> recency;  // LoadedModel::Recency()
    std::string name;
    std::shared_ptr<LoadedModel> model;
  };
  std::vector<Victim> victims;
  int64_t loaded_bytes = 0;
  for (auto& [other, model] : models()) {
    loaded_bytes += model->ResidentBytes();
    if (other == name) continue;
    // use_count: the registry's slot, the map models() returned, and any request's.
    victims.push_back({model.use_count() > 2, model->Recency(), other, model});
  }
  const bool in_order = order == VictimOrder::kInOrder;
  std::sort(victims.begin(), victims.end(), [in_order](const Victim& a, const Victim& b) {
    return in_order ? a.recency < b.recency
                    : std::tie(a.busy, a.recency) < std::tie(b.busy, b.recency);
  });
  std::vector<const LoadedModel*> idle;  // retired with nothing else holding them
  for (Victim& v : victims) {
    if (loaded_bytes + incoming <= budget || (v.busy && order != VictimOrder::kBusyToo)) break;
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(v.name);
    if (it == slots_.end() || it->second.loaded != v.model) continue;
    loaded_bytes -= v.model->ResidentBytes();
    it->second.known_bytes = v.model->ResidentBytes();
    it->second.loaded = nullptr;
    if (!v.busy) idle.push_back(v.model.get());
    RetireLocked(v.model, "budget");
    Log(absl::StrCat("model ", v.name, ": unloading (least recently used", v.busy ? ", busy" : "",
                     ") to make room for ", name, " within ", Mb(budget)));
  }
  victims.clear();  // drops this list's references: idle victims go to the reaper now
  // Waits for the idle victims to be freed (the reaper does it at once; kFreeWait bounds the wait
  // for one a request took meanwhile), not for busy ones, which finish their requests first.
  constexpr auto kFreeWait = std::chrono::seconds(2);
  std::unique_lock<std::mutex> lock(reaper_mu_);
  freed_.wait_for(lock, kFreeWait, [&] {
    return stopping_ || std::none_of(idle.begin(), idle.end(), [&](const LoadedModel* m) {
             return retiring_.count(const_cast<LoadedModel*>(m)) > 0;
           });
  });
  return stopping_ || loaded_bytes + incoming <= budget;
}

bool ModelRegistry::Install(const std::string& name, std::shared_ptr<LoadedModel> fresh,
                            const char* unload_reason) {
  std::shared_ptr<LoadedModel> old;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return false;  // `fresh` is freed when dropped (Released)
    Slot& slot = slots_[name];
    old = std::move(slot.loaded);
    slot.loaded = std::move(fresh);
    slot.card = slot.loaded->card;
    slot.known_bytes = slot.loaded->ResidentBytes();
    if (old != nullptr) RetireLocked(old, unload_reason);
  }
  return true;
}

void ModelRegistry::SetBudget(int64_t bytes) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  budget_bytes_ = std::max<int64_t>(bytes, 0);
  if (bytes <= 0) return;
  int64_t loaded_bytes = 0;
  // Least recently used first (LoadedModel::Recency).
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> by_use;
  for (const auto& [name, model] : models()) {
    loaded_bytes += model->ResidentBytes();
    by_use.emplace_back(model->Recency(), name);
  }
  std::sort(by_use.begin(), by_use.end());
  for (const auto& [used, name] : by_use) {
    if (loaded_bytes <= bytes) break;
    std::shared_ptr<LoadedModel> out;
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(name);
    if (it == slots_.end() || it->second.loaded == nullptr) continue;
    out = std::move(it->second.loaded);
    loaded_bytes -= out->ResidentBytes();
    it->second.known_bytes = out->ResidentBytes();
    RetireLocked(out, "budget");
    Log(absl::StrCat("model ", name, ": unloading to fit the memory budget of ", Mb(bytes)));
  }
}

ModelRegistry::ApplyResult ModelRegistry::Apply(const std::vector<ModelSpec>& specs) {
  absl::MutexLock apply_lock(&apply_mu_);
  std::lock_guard<std::mutex> load_lock(load_mu_);  // no load on demand meanwhile
  ApplyResult result;
  // What is served now: also where an unchanged file's mapping is found again.
  ModelMap current = models();
  const CardMap cards_now = cards();
  std::set<std::string> wanted;
  for (const ModelSpec& spec : specs) wanted.insert(spec.name);
  // Removed names first: new requests get NOT_FOUND from now on.
  if (!RemoveUnwanted(cards_now, wanted, &result)) return result;
  std::vector<std::shared_ptr<LoadedModel>> loaded_now;  // this Apply's loads, for sharing
  for (const ModelSpec& spec : specs) {
    auto card = cards_now.find(spec.name);
    const bool known = card != cards_now.end();
    const bool unchanged = known && SameLoad(card->second->spec, spec) &&
                           card->second->stamp == StampFile(spec.path);
    if (unchanged) continue;
    // A catalogued name stays a card until a request wants it; one loaded now is reloaded.
    const bool load = current.count(spec.name) > 0 || !spec.on_demand;
    if (!(load ? LoadOrReplace(spec, current, &loaded_now, &result) : Catalogue(spec, &result))) {
      return result;
    }
  }
  current.clear();  // outside the locks: may hand models to the reaper
  return result;
}

bool ModelRegistry::RemoveUnwanted(const CardMap& current, const std::set<std::string>& wanted,
                                   ApplyResult* result) {
  for (const auto& [name, card] : current) {
    if (wanted.count(name)) continue;
    std::shared_ptr<LoadedModel> out;
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return false;
      auto it = slots_.find(name);
      if (it == slots_.end()) continue;
      out = std::move(it->second.loaded);
      slots_.erase(it);
      if (out != nullptr) RetireLocked(out, "removed");
    }
    Notify(name, false);
    Log(absl::StrCat("model ", name,
                     ": removed (in-flight requests finish; new ones get "
                     "NOT_FOUND)"));
    result->removed.push_back(name);
  }
  return true;
}

bool ModelRegistry::Catalogue(const ModelSpec& spec, ApplyResult* result) {
  auto card = ReadModelCard(spec);
  bool is_new = false;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return false;
    if (!card.ok()) {
      ++stats_.load_failures[spec.name];
    } else {
      is_new = slots_.count(spec.name) == 0;
      slots_[spec.name].card = *card;
    }
  }
  if (!card.ok()) {
    Log(absl::StrCat("model ", spec.name, ": cannot read ", spec.path, ": ",
                     card.status().message()));
    result->failed.push_back(spec.name);
    return true;
  }
  Notify(spec.name, true);  // served: its first request loads it
  Log(absl::StrCat("model ", spec.name, ": catalogued from ", spec.path,
                   " (loaded by its first request)"));
  (is_new ? result->added : result->replaced).push_back(spec.name);
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
  bool is_new;
  {
    absl::ReaderMutexLock lock(&mu_);
    is_new = slots_.count(spec.name) == 0;
  }
  if (is_new) Notify(spec.name, false);  // NOT_SERVING until it is ready
  std::shared_ptr<const Model> model = SharedMapping(spec, stamp, *loaded_now, current);
  const absl::Time start = absl::Now();
  const int64_t rss_before = ProcessRss();
  const bool shared = model != nullptr;
  if (model == nullptr) {
    auto card = ReadModelCard(spec);
    absl::Status status = card.ok() ? MakeRoom(spec.name, ExpectedBytes(**card))
                                    : card.status();
    auto load = status.ok() ? Model::Load(spec.path, spec.model_options)
                            : absl::StatusOr<std::shared_ptr<const Model>>(status);
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
  std::shared_ptr<LoadedModel> fresh = Own(NewLoaded(spec, stamp, std::move(model)));
  fresh->MarkUsed(use_counter_.fetch_add(1) + 1);
  if (!shared) fresh->load_bytes = ProcessRss() - rss_before;
  cold_start_seconds_.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  const std::string description = Describe(*fresh);
  loaded_now->push_back(fresh);
  if (!Install(spec.name, std::move(fresh), "replaced")) return false;
  {
    absl::MutexLock lock(&mu_);
    ++residency_.loads["reload"];
  }
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

ModelRegistry::ResidencyStats ModelRegistry::residency_stats() const {
  ResidencyStats stats;
  ModelMap loaded;
  {
    absl::ReaderMutexLock lock(&mu_);
    stats = residency_;
    stats.catalogued = static_cast<int64_t>(slots_.size());
  }
  for (const auto& [name, model] : models()) {
    ++stats.loaded;
    stats.loaded_bytes += model->ResidentBytes();
  }
  return stats;
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
    for (auto& [name, slot] : slots_) {
      if (slot.loaded != nullptr) models.emplace(name, std::move(slot.loaded));
    }
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
    freed_.notify_all();
  }
  for (LoadedModel* m : released) delete m;
  models.clear();  // references still held elsewhere free their models when dropped
}

}  // namespace glossa::server
