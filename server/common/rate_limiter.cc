#include "server/common/rate_limiter.h"

namespace glossa::server {

bool RateLimiter::Allow(absl::string_view key, absl::Time now) {
  if (per_minute_ <= 0) return true;
  absl::MutexLock lock(&mu_);
  if (now - last_prune_ > absl::Seconds(10) || windows_.size() >= max_keys_) Prune(now);
  std::deque<absl::Time>& window = windows_[std::string(key.substr(0, kMaxKeyBytes))];
  while (!window.empty() && now - window.front() >= absl::Minutes(1)) window.pop_front();
  if (static_cast<int>(window.size()) >= per_minute_) return false;
  window.push_back(now);
  return true;
}

void RateLimiter::Prune(absl::Time now) {
  last_prune_ = now;
  for (auto it = windows_.begin(); it != windows_.end();) {
    std::deque<absl::Time>& window = it->second;
    while (!window.empty() && now - window.front() >= absl::Minutes(1)) window.pop_front();
    it = window.empty() ? windows_.erase(it) : std::next(it);
  }
  // Still full (that many clients within a minute): forget a tenth of them.
  if (windows_.size() < max_keys_) return;
  auto it = windows_.begin();
  while (windows_.size() > max_keys_ - max_keys_ / 10 - 1 && it != windows_.end()) {
    it = windows_.erase(it);
  }
}

}  // namespace glossa::server
