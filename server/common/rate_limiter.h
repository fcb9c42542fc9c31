// Requests per client per minute, as LibreTranslate's --req-limit: a sliding window of the last
// 60 seconds per key (the client's name or address). Memory is bounded: a key counts by its
// first kMaxKeyBytes bytes, keys whose window is empty are dropped, and with max_keys clients in
// one minute a tenth of the keys are forgotten (those clients start a new window).
#ifndef GLOSSA_SERVER_COMMON_RATE_LIMITER_H_
#define GLOSSA_SERVER_COMMON_RATE_LIMITER_H_

#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace glossa::server {

class RateLimiter {
 public:
  // per_minute <= 0: no limit.
  explicit RateLimiter(int per_minute, size_t max_keys = 100000)
      : per_minute_(per_minute), max_keys_(max_keys) {}

  // True, and the request counted, when `key` has made fewer than per_minute requests in the
  // minute before `now`; false (not counted) otherwise.
  bool Allow(absl::string_view key, absl::Time now);
  int per_minute() const { return per_minute_; }
  static constexpr size_t kMaxKeyBytes = 128;

 private:
  void Prune(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int per_minute_;
  const size_t max_keys_;
  absl::Mutex mu_;
  std::map<std::string, std::deque<absl::Time>> windows_ ABSL_GUARDED_BY(mu_);
  absl::Time last_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_COMMON_RATE_LIMITER_H_
