#include "ops/row_cache.h"

#include <algorithm>
#include <limits>

namespace glossa::ops {

RowCache::RowCache(const float* table, int64_t count, int64_t dim, StoredCopy copy,
                   int64_t max_rows)
    : table_(table),
      dim_(dim),
      max_rows_(std::clamp<int64_t>(max_rows, 0,
                                    std::min<int64_t>(count, std::numeric_limits<int32_t>::max()))),
      copy_(std::move(copy)),
      slot_(new std::atomic<int32_t>[static_cast<size_t>(count)]),
      // Default-initialised: the pages stay untouched until rows are copied in.
      storage_(new float[static_cast<size_t>(max_rows_ * dim)]) {
  for (int64_t i = 0; i < count; ++i) slot_[i].store(-1, std::memory_order_relaxed);
  full_.store(max_rows_ == 0, std::memory_order_relaxed);
}

const float* RowCache::Find(int64_t id) {
  int32_t slot = slot_[id].load(std::memory_order_acquire);
  if (slot >= 0) return storage_.get() + slot * dim_;
  if (full_.load(std::memory_order_relaxed)) return nullptr;
  absl::MutexLock lock(&mu_);
  slot = slot_[id].load(std::memory_order_relaxed);  // another thread may have copied it
  if (slot >= 0) return storage_.get() + slot * dim_;
  if (kept_ == max_rows_) return nullptr;
  float* row = storage_.get() + kept_ * dim_;
  copy_(table_ + id * dim_, static_cast<uint64_t>(dim_) * sizeof(float), row);
  slot_[id].store(static_cast<int32_t>(kept_), std::memory_order_release);
  if (++kept_ == max_rows_) full_.store(true, std::memory_order_relaxed);
  return row;
}

int64_t RowCache::rows_kept() const {
  absl::MutexLock lock(&mu_);
  return kept_;
}

}  // namespace glossa::ops
