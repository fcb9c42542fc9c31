// A cache of finished translations, shared by every model and RPC of a server: LRU, bounded in
// bytes. Keyed by model name, the resolved decoding options and the source text, so that a hit
// is exactly what the engine would compute (see CacheKey; the model's generation is part of it, so
// a model reloaded under the same name starts with no entries); requests that are not deterministic
// (sampling without a seed: the engine draws one) are never looked up nor stored.
//
// A request of several texts is answered from the cache for the texts it holds; only the others
// go to the engine (TakeCached, then StoreAndMerge when the job is done).
#ifndef GLOSSA_SERVER_CACHE_RESULT_CACHE_H_
#define GLOSSA_SERVER_CACHE_RESULT_CACHE_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/text_job.h"
#include "server/request/request.h"

namespace glossa::server {

class ResultCache {
 public:
  explicit ResultCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Copies the entry out and makes it the most recently used.
  std::optional<Translation> Lookup(const std::string& key);
  // Stores (or refreshes) an entry, evicting the least recently used ones beyond the capacity;
  // an entry larger than the whole capacity is not stored.
  void Insert(const std::string& key, const Translation& translation);

  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    int64_t bytes = 0, entries = 0, capacity_bytes = 0;
  };
  Stats stats() const;

  // The bytes an entry is charged: key, texts, ids, scores and a fixed overhead.
  static int64_t EntryBytes(const std::string& key, const Translation& translation);

 private:
  struct Entry {
    std::string key;
    Translation translation;
    int64_t bytes;
  };
  const int64_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0};
};

// The key of one text of a prepared request; empty when the request is not deterministic.
std::string CacheKey(const PreparedRequest& p, const std::string& text);

// For each text of the request, its cached translation if any; the texts found are removed from
// p->sources, so that the engine translates only the others. Nothing happens when `cache` is null
// or the request is not deterministic (all nullopt).
std::vector<std::optional<Translation>> TakeCached(ResultCache* cache,
                                                   const std::vector<std::string>& texts,
                                                   PreparedRequest* p);
// Stores the translations the engine computed (texts not in `cached`) and puts the cached ones
// in their places: `translations` then holds one Translation per text.
void StoreAndMerge(ResultCache* cache, const std::vector<std::string>& texts,
                   const PreparedRequest& p, std::vector<std::optional<Translation>> cached,
                   std::vector<Translation>* translations);

// --cache_bytes when not given: 1/256 of the machine's memory, at most 1 GiB.
int64_t DefaultCacheBytes();

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_CACHE_RESULT_CACHE_H_
