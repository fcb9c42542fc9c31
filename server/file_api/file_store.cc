#include "server/file_api/file_store.h"

#include <sys/random.h>

#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace glossa::server {

absl::StatusOr<std::string> RandomName() {
  char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError("no random bytes for a file name");
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

void FileStore::Evict(absl::Time now, int64_t incoming) {
  while (!order_.empty()) {
    auto it = files_.find(order_.front());
    if (it == files_.end()) {  // already gone
      order_.pop_front();
      continue;
    }
    const bool expired = now - it->second.added >= ttl_;
    if (!expired && bytes_ + incoming <= max_bytes_) break;
    bytes_ -= static_cast<int64_t>(it->second.file->bytes.size());
    files_.erase(it);
    order_.pop_front();
  }
}

absl::StatusOr<std::string> FileStore::Put(StoredFile file, absl::Time now) {
  const int64_t size = static_cast<int64_t>(file.bytes.size());
  if (size > max_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the translated file (", size, " bytes) is larger than the ", max_bytes_,
                     " bytes kept for downloads"));
  }
  auto name = RandomName();
  if (!name.ok()) return name.status();
  auto stored = std::make_shared<const StoredFile>(std::move(file));
  absl::MutexLock lock(&mu_);
  Evict(now, size);
  files_[*name] = Entry{std::move(stored), now};
  order_.push_back(*name);
  bytes_ += size;
  return name;
}

std::shared_ptr<const StoredFile> FileStore::Get(const std::string& name, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Evict(now, 0);
  auto it = files_.find(name);
  if (it == files_.end()) return nullptr;
  return it->second.file;
}

int64_t FileStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t FileStore::size() const {
  absl::MutexLock lock(&mu_);
  return files_.size();
}

}  // namespace glossa::server
