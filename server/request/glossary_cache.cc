#include "server/request/glossary_cache.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace glossa::server {

// One glossary's compiled form, compiled by the first caller under mu.
struct GlossaryCache::Entry {
  explicit Entry(const std::shared_ptr<const Glossary>& from) : glossary(from) {}

  const std::weak_ptr<const Glossary> glossary;  // what it is compiled from
  absl::Mutex mu;
  bool compiled ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<std::shared_ptr<const CompiledGlossary>> result ABSL_GUARDED_BY(mu);
};

namespace {

absl::StatusOr<std::shared_ptr<const CompiledGlossary>> Compile(const Glossary& glossary) {
  std::vector<GlossaryTerm> terms;
  terms.reserve(glossary.entries.size());
  for (const v1::GlossaryEntry& entry : glossary.entries) {
    terms.push_back({entry.source(), {entry.targets().begin(), entry.targets().end()}});
  }
  absl::StatusOr<CompiledGlossary> compiled = CompiledGlossary::Compile(std::move(terms));
  if (!compiled.ok()) return compiled.status();
  return std::make_shared<const CompiledGlossary>(*std::move(compiled));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Glossary>> GlossaryCache::Find(absl::string_view id) const {
  return store_->Find(id);
}

absl::StatusOr<std::shared_ptr<const CompiledGlossary>> GlossaryCache::Compiled(
    const std::shared_ptr<const Glossary>& glossary) const {
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(glossary->info.glossary_id());
    if (it != entries_.end() && it->second->glossary.lock() == glossary) {
      entry = it->second;
    } else {
      // A glossary compiled for the first time: the entries of deleted glossaries go first.
      absl::erase_if(entries_, [](const auto& e) { return e.second->glossary.expired(); });
      entry = std::make_shared<Entry>(glossary);
      entries_[glossary->info.glossary_id()] = entry;
    }
  }
  absl::MutexLock lock(&entry->mu);
  if (!entry->compiled) {
    entry->result = Compile(*glossary);
    entry->compiled = true;
    ++compilations_;
  }
  return entry->result;
}

size_t GlossaryCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace glossa::server
