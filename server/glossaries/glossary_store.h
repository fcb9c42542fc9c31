// Stored glossaries (GlossaryService, /v1/glossaries, TranslateRequest.glossary_id): created,
// listed, found and deleted by id; kept in memory, and with a directory also on disk, one file
// per glossary, so that they outlive a restart. Bounded by GlossaryLimits: max_glossaries of
// them, and max_store_bytes held in memory together (each counted as GlossaryHeldBytes counts).
//
// On disk: <dir>/<id>.json, {"format": 1, "glossary_id", "name", "source_language",
// "target_language", "creation_time", "entries": [{"source", "targets": [...]}, ...]}. Each file
// is written whole to <id>.json.tmp, fsync'd, renamed over <id>.json and the directory fsync'd,
// so a crash (kill -9, power loss) leaves either no file or the whole one; a Create that returned
// OK is on disk. Open removes leftover .tmp files and skips a file it cannot read or that breaks
// the rules of Create (it warns on stderr and leaves the file as it is).
//
// Thread-safe. Find never waits for a disk write: the file is written outside the lock.
#ifndef GLOSSA_SERVER_GLOSSARIES_GLOSSARY_STORE_H_
#define GLOSSA_SERVER_GLOSSARIES_GLOSSARY_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glossa/v1/translator.pb.h"
#include "server/glossaries/glossary_formats.h"  // GlossaryLimits

namespace glossa::server {

struct Glossary {
  v1::GlossaryInfo info;
  std::vector<v1::GlossaryEntry> entries;
};

class GlossaryStore {
 public:
  // dir empty: glossaries live in memory only (lost at exit). Otherwise loads every stored
  // glossary from dir (creating it if missing); a damaged file is skipped with a warning on
  // stderr. Every whole glossary is loaded, even past limits.max_glossaries or
  // limits.max_store_bytes (a warning on stderr says so): Create then refuses until enough are
  // deleted. Fails when dir cannot be created, read or written.
  static absl::StatusOr<std::unique_ptr<GlossaryStore>> Open(const std::string& dir,
                                                             GlossaryLimits limits = {});

  // Validates the request (INVALID_ARGUMENT naming the field, line or entry at fault), stores
  // the glossary under a new random id and returns its description. RESOURCE_EXHAUSTED when the
  // store holds limits.max_glossaries, or when the glossary's bytes would take the store past
  // limits.max_store_bytes (the message names glossa-server's --glossary_store_mb); INTERNAL
  // when the file cannot be written (the server's stderr says why; the message does not name
  // server paths).
  absl::StatusOr<v1::GlossaryInfo> Create(const v1::CreateGlossaryRequest& request);
  // Every glossary, oldest first.
  std::vector<v1::GlossaryInfo> List() const;
  // NOT_FOUND names the id.
  absl::StatusOr<std::shared_ptr<const Glossary>> Find(absl::string_view glossary_id) const;
  // NOT_FOUND when unknown; INTERNAL when the file cannot be removed (the glossary stays).
  // A deleted glossary's bytes are free for the next Create.
  absl::Status Delete(absl::string_view glossary_id);
  // What the stored glossaries, and those being created, hold as GlossaryHeldBytes counts it.
  int64_t HeldBytes() const;

 private:
  GlossaryStore(std::string dir, GlossaryLimits limits) : dir_(std::move(dir)), limits_(limits) {}
  // Reads every <id>.json of dir_ (removing .tmp files).
  absl::Status Load();
  // A creation time after every earlier one (creation order survives a restart).
  absl::Time NextCreationTime() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const GlossaryLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Glossary>> glossaries_
      ABSL_GUARDED_BY(mu_);
  int writing_ ABSL_GUARDED_BY(mu_) = 0;  // Creates between their check of the count and insert
  // GlossaryHeldBytes of every stored glossary and of those that writing_ counts.
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_creation_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GLOSSARIES_GLOSSARY_STORE_H_
