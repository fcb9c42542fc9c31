#include "server/files/archive.h"

#include <zip.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

struct ArchiveCloser {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
struct FileCloser {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};
struct SourceFreer {
  void operator()(zip_source_t* source) const { zip_source_free(source); }
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", why));
}

// Entry i, inflated: exactly its declared size.
absl::StatusOr<std::string> ReadEntry(zip_t* archive, zip_uint64_t i, const zip_stat_t& stat,
                                      absl::string_view what) {
  std::unique_ptr<zip_file_t, FileCloser> file(zip_fopen_index(archive, i, 0));
  if (file == nullptr) {
    return Invalid(what, absl::StrCat("has an entry that cannot be read (", stat.name,
                                      "): ", zip_strerror(archive)));
  }
  std::string data(stat.size, '\0');
  zip_int64_t got = 0;
  while (got < static_cast<zip_int64_t>(data.size())) {
    const zip_int64_t n = zip_fread(file.get(), data.data() + got, data.size() - got);
    if (n <= 0) break;
    got += n;
  }
  char extra;
  if (got != static_cast<zip_int64_t>(data.size()) || zip_fread(file.get(), &extra, 1) != 0) {
    return Invalid(what,
                   absl::StrCat("is damaged: entry ", stat.name, " is not as its header says"));
  }
  return data;
}

// libzip converts each entry's DOS time with mktime() when it reads an archive's directory and
// with localtime(), whose result is shared, when it writes one: one archive at a time does that.
// (std::mutex: ThreadSanitizer sees pthread's locks, not those of Debian's uninstrumented Abseil.)
std::mutex g_time_mu;

}  // namespace

absl::StatusOr<std::vector<ArchiveEntry>> ReadArchive(absl::string_view bytes,
                                                      absl::string_view what,
                                                      const ArchiveLimits& limits) {
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_source_t, SourceFreer> source(
      zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error));
  if (source == nullptr) return absl::ResourceExhaustedError("no memory to read the archive");
  std::lock_guard<std::mutex> time_lock(g_time_mu);  // local headers are read as entries open
  Archive archive(zip_open_from_source(source.get(), ZIP_RDONLY | ZIP_CHECKCONS, &error));
  zip_error_fini(&error);
  if (archive == nullptr) return Invalid(what, "is not a zip archive, or a damaged one");
  source.release();  // the archive owns it now
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  if (n > limits.max_entries) {
    return Invalid(what, absl::StrCat("has ", n, " entries; the limit is ", limits.max_entries));
  }
  std::vector<zip_stat_t> stats(n);
  int64_t total = 0;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t& stat = stats[i];
    if (zip_stat_index(archive.get(), i, 0, &stat) != 0 || stat.name == nullptr) {
      return Invalid(what, "is damaged: an entry cannot be read");
    }
    if (stat.encryption_method != ZIP_EM_NONE) return Invalid(what, "is encrypted");
    total += static_cast<int64_t>(stat.size);
    if (total > limits.max_total_bytes) {
      return Invalid(what, absl::StrCat("inflates to more than ", limits.max_total_bytes,
                                        " bytes (the limit)"));
    }
    const zip_uint64_t ratio = stat.size / std::max<zip_uint64_t>(stat.comp_size, 1);
    if (static_cast<int64_t>(stat.size) > limits.min_ratio_bytes &&
        ratio > static_cast<zip_uint64_t>(limits.max_ratio)) {
      return Invalid(what, absl::StrCat("has an entry compressed ", ratio, " times (", stat.name,
                                        "): refused as a zip bomb"));
    }
  }
  // Many entries each under the bound above can still inflate a small upload a thousandfold.
  const int64_t archive_bytes = std::max<int64_t>(static_cast<int64_t>(bytes.size()), 1);
  if (total > limits.min_ratio_bytes && total / archive_bytes > limits.max_ratio) {
    return Invalid(what, absl::StrCat("inflates ", total / archive_bytes, " times its ",
                                      archive_bytes, " bytes: refused as a zip bomb"));
  }
  if (limits.reserve) {
    if (absl::Status reserved = limits.reserve(total); !reserved.ok()) return reserved;
  }
  std::vector<ArchiveEntry> entries;
  for (zip_int64_t i = 0; i < n; ++i) {
    auto data = ReadEntry(archive.get(), i, stats[i], what);
    if (!data.ok()) return data.status();
    entries.push_back({stats[i].name, *std::move(data), stats[i].comp_method == ZIP_CM_STORE});
  }
  return entries;
}

absl::StatusOr<std::string> WriteArchive(const std::vector<ArchiveEntry>& entries) {
  std::lock_guard<std::mutex> time_lock(g_time_mu);
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) return absl::ResourceExhaustedError("no memory to write the archive");
  std::unique_ptr<zip_source_t, SourceFreer> owned(buffer);
  Archive archive(zip_open_from_source(buffer, ZIP_TRUNCATE, &error));
  zip_error_fini(&error);
  if (archive == nullptr) return absl::InternalError("cannot start a zip archive");
  zip_source_keep(buffer);  // the archive's reference, beside ours: read back after zip_close
  for (const ArchiveEntry& entry : entries) {
    zip_source_t* data = zip_source_buffer(archive.get(), entry.data.data(), entry.data.size(), 0);
    const zip_int64_t index =
        data == nullptr ? -1
                        : zip_file_add(archive.get(), entry.name.c_str(), data, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      if (data != nullptr) zip_source_free(data);
      return absl::InternalError(absl::StrCat("cannot add ", entry.name,
                                              " to the archive: ", zip_strerror(archive.get())));
    }
    zip_set_file_compression(archive.get(), index, entry.stored ? ZIP_CM_STORE : ZIP_CM_DEFLATE, 0);
  }
  if (zip_close(archive.get()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot write the archive: ", zip_strerror(archive.get())));
  }
  archive.release();  // closed
  zip_stat_t stat;
  if (zip_source_stat(buffer, &stat) != 0 || zip_source_open(buffer) != 0) {
    return absl::InternalError("cannot read the written archive back");
  }
  std::string out(stat.size, '\0');
  const zip_int64_t got = zip_source_read(buffer, out.data(), out.size());
  zip_source_close(buffer);
  if (got != static_cast<zip_int64_t>(out.size())) {
    return absl::InternalError("cannot read the written archive back");
  }
  return out;
}

}  // namespace glossa::server
