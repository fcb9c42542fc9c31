#include "server/live/live_models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace glossa::server {

LiveModels::LiveModels(ModelRegistry* registry, std::string config_path, ModelDefaults defaults,
                       absl::Duration poll, int64_t flag_budget)
    : registry_(registry), path_(std::move(config_path)), defaults_(std::move(defaults)),
      poll_(poll), flag_budget_(flag_budget) {
  for (const auto& [name, card] : registry_->cards()) watched_paths_.push_back(card->spec.path);
}

LiveModels::~LiveModels() { Stop(); }

void LiveModels::Start() { thread_ = std::thread([this] { Loop(); }); }

void LiveModels::Reload() {
  std::lock_guard<std::mutex> lock(mu_);
  reload_requested_ = true;
  wake_.notify_one();
}

void LiveModels::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

// The config file's bytes and the identity of every model file it names: what a change shows in.
std::string LiveModels::Fingerprint() const {
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream data;
  if (in) data << in.rdbuf();
  std::string out = absl::StrCat(in ? "+" : "-", data.str().size(), ":", data.str());
  for (const std::string& path : watched_paths_) {
    const FileStamp s = StampFile(path);
    absl::StrAppend(&out, "\n", path, " ", s.exists, " ", s.device, " ", s.inode, " ", s.size, " ",
                    s.mtime_ns);
  }
  return out;
}

void LiveModels::ReloadNow(const char* why) {
  std::fprintf(stderr, "glossa-server: reloading %s (%s)\n", path_.c_str(), why);
  std::fflush(stderr);
  auto served = ReadServedModels(path_, defaults_);
  if (!served.ok()) {
    std::fprintf(stderr, "glossa-server: reload failed, the models stay as they were: %s\n",
                 std::string(served.status().message()).c_str());
    std::fflush(stderr);
    registry_->RecordReload(false);
    return;
  }
  watched_paths_.clear();
  for (const ModelSpec& spec : served->specs) watched_paths_.push_back(spec.path);
  // A smaller budget unloads models before anything loads; a larger one, after removals.
  const int64_t budget = served->max_loaded_mb >= 0 ? served->max_loaded_mb << 20 : flag_budget_;
  if (budget > 0 && (registry_->budget() == 0 || budget < registry_->budget())) {
    registry_->SetBudget(budget);
  }
  const ModelRegistry::ApplyResult result = registry_->Apply(served->specs);
  registry_->SetBudget(budget);
  registry_->RecordReload(result.failed.empty());
  std::fprintf(stderr,
               "glossa-server: reload %s: %zu added, %zu replaced, %zu removed, %zu failed%s%s; "
               "serving %s\n",
               result.failed.empty() ? "done" : "FAILED in part", result.added.size(),
               result.replaced.size(), result.removed.size(), result.failed.size(),
               result.failed.empty() ? "" : " (",
               result.failed.empty() ? "" : (absl::StrJoin(result.failed, ", ") + ")").c_str(),
               registry_->Names().c_str());
  std::fflush(stderr);
}

void LiveModels::Loop() {
  std::string applied = Fingerprint();  // what the served set was made from
  std::string previous = applied;
  const absl::Duration tick = poll_ > absl::ZeroDuration()
                                  ? std::min(poll_, absl::Milliseconds(100))
                                  : absl::Milliseconds(100);
  absl::Time next_poll = absl::Now() + poll_;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, absl::ToChronoMicroseconds(tick),
                   [this] { return stop_ || reload_requested_; });
    if (stop_) return;
    const bool requested = reload_requested_;
    reload_requested_ = false;
    const bool poll = poll_ > absl::ZeroDuration() && absl::Now() >= next_poll;
    if (!requested && !poll) continue;
    lock.unlock();
    if (requested) {
      ReloadNow("SIGHUP");
      applied = previous = Fingerprint();
    } else {
      next_poll = absl::Now() + poll_;
      const std::string now = Fingerprint();
      // Applied once it has held still for one poll: a file being written is not read half way.
      if (now != applied && now == previous) {
        ReloadNow("the file or a model file changed");
        applied = previous = Fingerprint();
      } else {
        previous = now;
      }
    }
    lock.lock();
  }
}

}  // namespace glossa::server
