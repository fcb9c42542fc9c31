// --model_config while the server runs: re-reads the file on request (SIGHUP) and when it, or a
// model file it names, changes, and applies it to the registry (ModelRegistry::Apply). A file
// that cannot be read or parsed changes nothing; each reload's outcome is counted in the
// registry's ReloadStats (glossa_model_reloads_total).
#ifndef GLOSSA_SERVER_LIVE_LIVE_MODELS_H_
#define GLOSSA_SERVER_LIVE_LIVE_MODELS_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "server/models/model_config.h"
#include "server/models/model_registry.h"

namespace glossa::server {

class LiveModels {
 public:
  // `registry` (loaded from the same file) must outlive this object. poll: how often the files'
  // identities are checked; a change is applied once it has held still for one poll (so that
  // a file being written is not read half way). Zero: no polling, only Reload().
  // flag_budget: the memory budget in bytes (--max_loaded_mb) while the file sets none.
  LiveModels(ModelRegistry* registry, std::string config_path, ModelDefaults defaults,
             absl::Duration poll, int64_t flag_budget = 0);
  ~LiveModels();  // Stop()

  void Start();
  // Asks for a reload now (from the SIGHUP handling thread); returns at once.
  void Reload();
  // Stops the thread, waiting for a reload in progress.
  void Stop();

 private:
  void Loop();
  void ReloadNow(const char* why);
  std::string Fingerprint() const;

  ModelRegistry* const registry_;
  const std::string path_;
  const ModelDefaults defaults_;
  const absl::Duration poll_;
  const int64_t flag_budget_;
  std::thread thread_;
  // The thread waits on these for a request or its tick. std::mutex and std::condition_variable
  // rather than absl::Mutex::Await: ThreadSanitizer intercepts the pthread calls under them, but
  // cannot see the ordering inside Debian's Abseil, which is built without it.
  std::mutex mu_;
  std::condition_variable wake_;  // reload_requested_ or stop_ was set
  bool reload_requested_ = false;  // guarded by mu_
  bool stop_ = false;              // guarded by mu_
  std::vector<std::string> watched_paths_;  // model files of the last parsed config (thread_)
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_LIVE_LIVE_MODELS_H_
