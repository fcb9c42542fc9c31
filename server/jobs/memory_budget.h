// A bound on the bytes that many users hold at once (the documents in flight, from every front
// end): each takes a Reservation, grows it before it holds more, and gives all of it back when
// the Reservation is destroyed. Counts are what the users declare, not what malloc sees.
#ifndef GLOSSA_SERVER_JOBS_MEMORY_BUDGET_H_
#define GLOSSA_SERVER_JOBS_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace glossa::server {

class MemoryBudget {
 public:
  // `limit` bytes in all; `flag` names the setting in messages ("--document_memory_mb").
  MemoryBudget(int64_t limit, std::string flag) : limit_(limit), flag_(std::move(flag)) {}

  class Reservation {
   public:
    Reservation() = default;
    explicit Reservation(MemoryBudget* budget) : budget_(budget) {}
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    // Holds `bytes` more. RESOURCE_EXHAUSTED while others hold too much for it (try later);
    // INVALID_ARGUMENT when this reservation alone would pass the limit (it never fits).
    // Nothing is held more on an error.
    absl::Status Grow(int64_t bytes);
    int64_t held() const { return held_; }
    void Release();

   private:
    MemoryBudget* budget_ = nullptr;
    int64_t held_ = 0;
  };

  Reservation Start() { return Reservation(this); }
  int64_t used() const { return used_.load(); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  const std::string flag_;
  std::atomic<int64_t> used_{0};
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_JOBS_MEMORY_BUDGET_H_
