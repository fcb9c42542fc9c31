#include "server/jobs/memory_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

int64_t Mib(int64_t bytes) { return (bytes + (1 << 20) - 1) >> 20; }

}  // namespace

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    held_ = std::exchange(other.held_, 0);
  }
  return *this;
}

absl::Status MemoryBudget::Reservation::Grow(int64_t bytes) {
  if (budget_ == nullptr || bytes <= 0) return absl::OkStatus();
  const int64_t limit = budget_->limit_;
  if (held_ + bytes > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the file needs about ", Mib(held_ + bytes), " MiB in memory to translate, more than ",
        "the ", Mib(limit), " MiB this server allows for all documents at once (",
        budget_->flag_, "): send it in parts"));
  }
  int64_t used = budget_->used_.load();
  do {
    if (used + bytes > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the documents in flight hold ", Mib(used), " of the ", Mib(limit), " MiB this server "
          "allows them (", budget_->flag_, "), and this one needs ", Mib(bytes),
          " MiB more: try again later"));
    }
  } while (!budget_->used_.compare_exchange_weak(used, used + bytes));
  held_ += bytes;
  return absl::OkStatus();
}

void MemoryBudget::Reservation::Release() {
  if (budget_ != nullptr && held_ > 0) budget_->used_.fetch_sub(held_);
  held_ = 0;
}

}  // namespace glossa::server
