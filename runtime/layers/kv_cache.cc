#include "layers/kv_cache.h"

#include <cstdlib>
#include <new>

#include "absl/strings/str_cat.h"

namespace glossa {

KvBlockPool::KvBlockPool(int64_t block_floats, int64_t max_blocks)
    : block_floats_(block_floats), max_blocks_(max_blocks) {}

KvBlockPool::~KvBlockPool() {
  for (float* b : all_) std::free(b);
}

float* KvBlockPool::Allocate() {
  absl::MutexLock lock(&mu_);
  if (!free_.empty()) {
    float* b = free_.back();
    free_.pop_back();
    in_use_.fetch_add(1, std::memory_order_relaxed);
    return b;
  }
  if (static_cast<int64_t>(all_.size()) >= max_blocks_) return nullptr;
  void* p = std::aligned_alloc(64, static_cast<size_t>(block_floats_) * sizeof(float));
  if (p == nullptr) return nullptr;
  all_.push_back(static_cast<float*>(p));
  free_.reserve(all_.capacity());  // Free() never reallocates
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<float*>(p);
}

void KvBlockPool::Free(float* block) {
  absl::MutexLock lock(&mu_);
  free_.push_back(block);
  in_use_.fetch_sub(1, std::memory_order_relaxed);
}

int64_t KvBlockPool::blocks_allocated() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(all_.size());
}

KvCache::KvCache(KvBlockPool* pool, int layers, int d_model, int slots, int max_positions)
    : pool_(pool), layers_(layers), d_(d_model), blocks_(slots) {
  const int blocks = (max_positions + kBlockPositions - 1) / kBlockPositions;
  for (auto& slot : blocks_) slot.reserve(blocks);
}

KvCache::~KvCache() {
  for (auto& slot : blocks_) {
    for (float* b : slot) pool_->Free(b);
  }
}

absl::Status KvCache::Reserve(int positions) {
  const size_t needed = (positions + kBlockPositions - 1) / kBlockPositions;
  for (auto& slot : blocks_) {
    while (slot.size() < needed) {
      float* b = pool_->Allocate();
      if (b == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("KV cache full: no free block for position ", positions - 1));
      }
      slot.push_back(b);
    }
  }
  return absl::OkStatus();
}

int64_t KvCache::bytes() const {
  int64_t blocks = 0;
  for (const auto& slot : blocks_) blocks += static_cast<int64_t>(slot.size());
  return blocks * pool_->block_bytes();
}

}  // namespace glossa
