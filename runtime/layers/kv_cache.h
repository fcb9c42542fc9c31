// The decoder's self-attention cache. Each hypothesis slot owns blocks of kBlockPositions
// positions holding every layer's keys and values; a step writes its K/V in place at the current
// position, and beams read their ancestors' rows by slot index, so reordering beams copies only
// small index arrays, never cache rows.
#ifndef GLOSSA_RUNTIME_LAYERS_KV_CACHE_H_
#define GLOSSA_RUNTIME_LAYERS_KV_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace glossa {

// A pool of equally sized blocks with O(1) allocate and free. Blocks return to the pool, not to
// the allocator, so steady-state decoding allocates nothing. max_blocks bounds the memory;
// Allocate answers nullptr ("no room") when it is reached.
class KvBlockPool {
 public:
  KvBlockPool(int64_t block_floats, int64_t max_blocks);
  ~KvBlockPool();
  float* Allocate();
  void Free(float* block);
  int64_t block_bytes() const { return block_floats_ * 4; }
  int64_t blocks_in_use() const { return in_use_.load(std::memory_order_relaxed); }  // lock-free
  int64_t blocks_allocated() const;

 private:
  const int64_t block_floats_;
  const int64_t max_blocks_;
  mutable absl::Mutex mu_;
  std::vector<float*> free_ ABSL_GUARDED_BY(mu_);
  std::vector<float*> all_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> in_use_{0};
};

class KvCache {
 public:
  static constexpr int kBlockPositions = 16;
  // Floats per block for this model shape: [layers][K,V][kBlockPositions][d_model].
  static int64_t BlockFloats(int layers, int d_model) {
    return int64_t{layers} * 2 * kBlockPositions * d_model;
  }

  // max_positions (optional): the most positions Reserve() will be asked for, so that the block
  // tables are sized once here and Reserve() allocates nothing but pool blocks.
  KvCache(KvBlockPool* pool, int layers, int d_model, int slots, int max_positions = 0);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Makes positions [0, positions) writable in every slot; RESOURCE_EXHAUSTED when the pool is full.
  absl::Status Reserve(int positions);

  float* Key(int layer, int slot, int position) { return Row(layer, 0, slot, position); }
  float* Value(int layer, int slot, int position) { return Row(layer, 1, slot, position); }
  int64_t bytes() const;

 private:
  float* Row(int layer, int kv, int slot, int position) {
    float* block = blocks_[slot][position / kBlockPositions];
    return block + ((int64_t{layer} * 2 + kv) * kBlockPositions + position % kBlockPositions) * d_;
  }

  KvBlockPool* pool_;
  int layers_;
  int64_t d_;
  std::vector<std::vector<float*>> blocks_;  // [slot][position / kBlockPositions]
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_KV_CACHE_H_
