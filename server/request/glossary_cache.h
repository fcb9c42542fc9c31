// Stored glossaries as requests use them (TranslateRequest.glossary_id): each glossary's terms and
// matcher (CompiledGlossary, whose matcher normalises every source term) are compiled the first
// time a request names it and shared by every request after, so that a request does not copy or
// normalise the stored terms again. A glossary that fails to compile (a source term that
// normalises to nothing) keeps its error the same way.
//
// An entry lives while its glossary is stored: entries whose glossary was deleted are dropped
// when the next glossary is compiled, so they never hold more glossaries than the store held
// then (the store's own bounds, --glossary_store_mb, bound them too).
//
// Thread-safe. Requests that name a glossary while it is compiled wait for that compilation.
#ifndef GLOSSA_SERVER_REQUEST_GLOSSARY_CACHE_H_
#define GLOSSA_SERVER_REQUEST_GLOSSARY_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/glossaries/glossary_store.h"
#include "text/glossary.h"

namespace glossa::server {

class GlossaryCache {
 public:
  // store: where glossary ids are looked up; it outlives the cache.
  explicit GlossaryCache(const GlossaryStore* store) : store_(store) {}
  GlossaryCache(const GlossaryCache&) = delete;
  GlossaryCache& operator=(const GlossaryCache&) = delete;

  // The stored glossary `id` (the store's Find: NOT_FOUND names the id).
  absl::StatusOr<std::shared_ptr<const Glossary>> Find(absl::string_view id) const;

  // The terms and matcher of `glossary` (from Find), its entries in order as terms: compiled on
  // the first call for it, the same pointer on every call after while it is stored.
  // INVALID_ARGUMENT as CompiledGlossary::Compile ("glossary entry N: ...").
  absl::StatusOr<std::shared_ptr<const CompiledGlossary>> Compiled(
      const std::shared_ptr<const Glossary>& glossary) const;

  // Glossaries compiled so far (a glossary's first use).
  int64_t compilations() const { return compilations_.load(); }
  // Glossaries whose compiled form is held.
  size_t size() const;

 private:
  struct Entry;

  const GlossaryStore* const store_;
  mutable absl::Mutex mu_;
  // By glossary id.
  mutable absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<int64_t> compilations_{0};
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_REQUEST_GLOSSARY_CACHE_H_
