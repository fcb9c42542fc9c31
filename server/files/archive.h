// Zip archives, the container of office documents and e-books (docx, pptx, xlsx, odt, odp,
// epub), read and written with libzip (Debian's libzip-dev: a maintained zip library that reads
// from and writes to memory and checks each entry's CRC).
//
// Reading is bounded before any entry is inflated: the entry count, each entry's declared size
// and their total, and the ratio of an entry's size to its compressed size and of the total to
// the archive's (a zip bomb's is in the thousands); an entry that inflates to other than its declared size is refused. Writing
// keeps the entries' order, names and compression (stored stays stored: an e-book's and an
// OpenDocument's "mimetype" must be first and stored). One archive is read or written at a time
// (libzip's time conversions share glibc's state).
#ifndef GLOSSA_SERVER_FILES_ARCHIVE_H_
#define GLOSSA_SERVER_FILES_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct ArchiveEntry {
  std::string name;
  std::string data;     // inflated
  bool stored = false;  // not compressed in the archive
};

struct ArchiveLimits {
  int64_t max_entries = 10000;
  int64_t max_total_bytes = 256 << 20;  // all entries inflated
  // Inflated / compressed, for each entry and for the whole archive (inflated total / the
  // archive's bytes), once over min_ratio_bytes: office XML compresses 5 to 50 times.
  int64_t max_ratio = 200;
  int64_t min_ratio_bytes = 64 << 10;
  // Told the inflated total once the bounds above pass, before any entry is inflated; its
  // error ends the read (a memory budget's). Unset: nothing is told.
  std::function<absl::Status(int64_t)> reserve;
};

// INVALID_ARGUMENT, with a message for a client, for bytes that are not a zip archive, a
// damaged one, an encrypted entry, or one over the limits. `what` names the file in messages
// ("the .docx file").
absl::StatusOr<std::vector<ArchiveEntry>> ReadArchive(absl::string_view bytes,
                                                      absl::string_view what,
                                                      const ArchiveLimits& limits = {});

absl::StatusOr<std::string> WriteArchive(const std::vector<ArchiveEntry>& entries);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILES_ARCHIVE_H_
