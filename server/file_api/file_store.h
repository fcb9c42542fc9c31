// Translated files waiting to be downloaded (LibreTranslate's /download_file/<name>): kept in
// memory for a while (`ttl`) and within a total size (the oldest dropped first), each under a
// name of 128 random bits from the kernel's CSPRNG, in hex, so that one client cannot fetch
// another's file by guessing.
#ifndef GLOSSA_SERVER_FILE_API_FILE_STORE_H_
#define GLOSSA_SERVER_FILE_API_FILE_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace glossa::server {

struct StoredFile {
  std::string file_name;  // what the download is called (Content-Disposition)
  std::string bytes;
};

class FileStore {
 public:
  FileStore(absl::Duration ttl, int64_t max_bytes) : ttl_(ttl), max_bytes_(max_bytes) {}

  // Keeps `file` and returns its name (32 hex digits). RESOURCE_EXHAUSTED when the file alone is
  // larger than the store; INTERNAL when no random bytes can be had.
  absl::StatusOr<std::string> Put(StoredFile file, absl::Time now);
  // The file of `name`, unless it expired or was dropped.
  std::shared_ptr<const StoredFile> Get(const std::string& name, absl::Time now);

  int64_t bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredFile> file;
    absl::Time added;
  };
  // Drops what expired, then the oldest until `incoming` more bytes fit.
  void Evict(absl::Time now, int64_t incoming) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration ttl_;
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> files_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // names, oldest first
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// 128 bits from getrandom(2), as 32 lowercase hex digits.
absl::StatusOr<std::string> RandomName();

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILE_API_FILE_STORE_H_
