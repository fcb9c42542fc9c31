#include "server/cache/result_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Every resolved option that changes what the engine computes (floats by their bits).
std::string OptionsKey(const SearchOptions& s) {
  std::string key = absl::StrCat(
      s.forced_bos_id, ",", s.beam_size, ",", s.num_hypotheses, ",", s.max_new_tokens, ",",
      Bits(s.length_penalty), ",", s.early_stopping, ",", Bits(s.sampling.temperature), ",",
      s.sampling.top_k, ",", Bits(s.sampling.top_p), ",", s.sampling.seed, ",",
      Bits(s.repetition_penalty), ",", s.no_repeat_ngram_size, ",", s.min_new_tokens, ",",
      s.token_scores, ",", s.alignment, ",", s.scores, ",[");
  for (int id : s.prefix) absl::StrAppend(&key, id, ",");
  key += "]";
  return key;
}

}  // namespace

int64_t ResultCache::EntryBytes(const std::string& key, const Translation& translation) {
  int64_t bytes = 128 + static_cast<int64_t>(key.size());  // list node, index slot, vectors
  for (const TranslatedHypothesis& h : translation.hypotheses) {
    bytes += 64 + static_cast<int64_t>(h.text.size() + 4 * h.token_ids.size() +
                                       4 * h.token_scores.size() + 4 * h.alignment.size() +
                                       4 * h.attention.size());
  }
  return bytes;
}

std::optional<Translation> ResultCache::Lookup(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->translation;
}

void ResultCache::Insert(const std::string& key, const Translation& translation) {
  const int64_t bytes = EntryBytes(key, translation);
  if (bytes > capacity_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) {  // computed twice: refresh
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  while (bytes_ + bytes > capacity_bytes_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  lru_.push_front({key, translation, bytes});
  index_.emplace(key, lru_.begin());
  bytes_ += bytes;
}

ResultCache::Stats ResultCache::stats() const {
  Stats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.capacity_bytes = capacity_bytes_;
  absl::MutexLock lock(&mu_);
  s.bytes = bytes_;
  s.entries = static_cast<int64_t>(lru_.size());
  return s;
}

std::string CacheKey(const PreparedRequest& p, const std::string& text) {
  if (!p.deterministic) return "";
  // The generation: a model replaced under the same name does not answer with the old one's.
  return absl::StrCat(p.model->name, "#", p.model->generation, std::string(1, '\0'),
                      p.source_token, ",",
                      OptionsKey(p.search),
                      std::string(1, '\0'), text);
}

std::vector<std::optional<Translation>> TakeCached(ResultCache* cache,
                                                   const std::vector<std::string>& texts,
                                                   PreparedRequest* p) {
  std::vector<std::optional<Translation>> cached(texts.size());
  // Documents (split_sentences) are not cached: their sources are sentences, not the texts.
  // Nor are requests whose glossary terms occur in their texts (each text its own constraints).
  if (cache == nullptr || !p->deterministic || p->documents != nullptr ||
      !p->constraints.empty()) {
    return cached;
  }
  TextSources& s = p->sources;
  size_t kept = 0;
  for (size_t k = 0; k < s.sources.size(); ++k) {
    const size_t i = s.text_index[k];
    cached[i] = cache->Lookup(CacheKey(*p, texts[i]));
    if (cached[i]) continue;
    if (kept != k) s.sources[kept] = std::move(s.sources[k]);  // (a self-move would empty it)
    s.text_index[kept++] = i;
  }
  s.sources.resize(kept);
  s.text_index.resize(kept);
  return cached;
}

void StoreAndMerge(ResultCache* cache, const std::vector<std::string>& texts,
                   const PreparedRequest& p, std::vector<std::optional<Translation>> cached,
                   std::vector<Translation>* translations) {
  if (cache != nullptr && p.deterministic && p.documents == nullptr && p.constraints.empty()) {
    for (size_t i : p.sources.text_index) cache->Insert(CacheKey(p, texts[i]), (*translations)[i]);
  }
  for (size_t i = 0; i < cached.size() && i < translations->size(); ++i) {
    if (cached[i]) (*translations)[i] = *std::move(cached[i]);
  }
}

int64_t DefaultCacheBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const int64_t memory = pages > 0 && page > 0 ? int64_t{pages} * page : int64_t{4} << 30;
  return std::min<int64_t>(memory / 256, int64_t{1} << 30);
}

}  // namespace glossa::server
