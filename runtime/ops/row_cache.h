// Rows of a large table that stays in the model file (an embedding: NLLB's is 1 GB), each copied
// out on its first use and kept. Copying a row out of the file is a system call
// (ModelFile::CopyOut, ~1 µs); a text uses a few thousand distinct tokens, so after the first
// sentences almost every row comes from here, and the process holds only the rows in use, never the
// whole table. At most max_rows rows are kept (the engine gives 16 MB per table); rows past that
// are read from the file each time (Find answers nullptr). Thread-safe: workers share one cache per
// table.
#ifndef GLOSSA_RUNTIME_OPS_ROW_CACHE_H_
#define GLOSSA_RUNTIME_OPS_ROW_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ops/ops.h"

namespace glossa::ops {

class RowCache {
 public:
  // The default budget per table.
  static constexpr int64_t kDefaultBytes = int64_t{16} << 20;

  // table: [count, dim] floats, read only through `copy`.
  RowCache(const float* table, int64_t count, int64_t dim, StoredCopy copy, int64_t max_rows);
  RowCache(const RowCache&) = delete;
  RowCache& operator=(const RowCache&) = delete;

  // Row `id` (0 <= id < count), copied out on its first call; nullptr when it is not kept and the
  // cache is full.
  const float* Find(int64_t id);

  int64_t rows_kept() const;

 private:
  const float* const table_;
  const int64_t dim_;
  const int64_t max_rows_;
  const StoredCopy copy_;
  // [count]: where row id is kept in storage_ (in rows), or -1. Set once, after the copy.
  std::unique_ptr<std::atomic<int32_t>[]> slot_;
  // [max_rows, dim], filled in order; pages are touched only as rows arrive.
  std::unique_ptr<float[]> storage_;
  mutable absl::Mutex mu_;
  int64_t kept_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> full_{false};  // kept_ == max_rows_: a miss needs no lock
};

}  // namespace glossa::ops

#endif  // GLOSSA_RUNTIME_OPS_ROW_CACHE_H_
