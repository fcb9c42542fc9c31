#include "model/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/checksums.h"
#include "util/status_macros.h"

namespace glossa {
namespace {

constexpr char kMagic[8] = {'G', 'L', 'O', 'S', 'S', 'A', 'M', 'F'};
constexpr uint64_t kPreambleSize = 24;
constexpr uint64_t kAlignment = 64;

template <typename T>
T ReadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86-64 and aarch64 are little-endian
  return v;
}

absl::StatusOr<DType> ParseDType(const std::string& s, const std::string& tensor) {
  if (s == "float32") return DType::kFloat32;
  if (s == "bfloat16") return DType::kBFloat16;
  if (s == "int8") return DType::kInt8;
  if (s == "bytes") return DType::kBytes;
  return absl::UnimplementedError(absl::StrCat("tensor '", tensor, "' has dtype '", s,
                                               "', which this build of Glossa cannot read"));
}

}  // namespace

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt8:
      return "int8";
    case DType::kBytes:
      break;
  }
  return "bytes";
}

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::ShapeString() const { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path,
                                                           bool verify_checksums,
                                                           int checksum_threads) {
  std::unique_ptr<ModelFile> file(new ModelFile());
  file->path_ = path;
  file->checksum_threads_ = checksum_threads;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat("cannot open model file '", path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  file->size_ = static_cast<uint64_t>(st.st_size);
  file->opened_ = {file->size_, st.st_mtim, st.st_ctim};
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map '", path, "': ", std::strerror(err)));
    }
    file->base_ = static_cast<const uint8_t*>(p);
    file->mapped_ = true;
  }
  file->fd_ = fd;
  GLOSSA_RETURN_IF_ERROR(file->ParseHeader(verify_checksums));
  return file;
}

void ModelFile::DropPages(const void* data, uint64_t bytes) const {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  if (!mapped_ || begin < base || begin + bytes > base + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages inside the range only
  const uintptr_t last = (begin + bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void ModelFile::Unmap() {
  if (!mapped_) return;
  // MAP_FIXED replaces the file's pages with an anonymous range that no access may touch.
  void* p = ::mmap(const_cast<uint8_t*>(base_), size_, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) {
    DropAllPages();  // the mapping stays (no reservation could be made): its pages go at least
    return;
  }
  mapped_ = false;
}

ModelFile::Stamp ModelFile::StampNow() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return {};  // size 0 and no times: never the stamp of Open
  return {static_cast<uint64_t>(st.st_size), st.st_mtim, st.st_ctim};
}

bool ModelFile::SameStamp(const Stamp& a, const Stamp& b) {
  return a.size == b.size && a.mtime.tv_sec == b.mtime.tv_sec &&
         a.mtime.tv_nsec == b.mtime.tv_nsec && a.ctime.tv_sec == b.ctime.tv_sec &&
         a.ctime.tv_nsec == b.ctime.tv_nsec;
}

absl::Status ModelFile::CheckUnchanged() const {
  const Stamp now = StampNow();
  if (SameStamp(now, opened_)) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("model file '", path_, "' changed while it was loaded (",
                                          opened_.size, " bytes when opened, ", now.size,
                                          " now): load it again once it is written"));
}

absl::Status ModelFile::ChangedError() const {
  return absl::DataLossError(absl::StrCat(
      "model file '", path_, "' changed on disk after it was loaded (", opened_.size,
      " bytes then, ", StampNow().size, " now): the weights the model still reads from it can "
      "no longer be trusted, so it translates no more; load the model again"));
}

void ModelFile::CopyOut(const void* data, uint64_t bytes, void* out) const {
  auto* to = static_cast<uint8_t*>(out);
  const uintptr_t at = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(base_);
  if (fd_ < 0 || base_ == nullptr || at < base || bytes > size_ || at - base > size_ - bytes) {
    std::memcpy(to, data, bytes);
    return;
  }
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, to + done, bytes - done, static_cast<off_t>(at - base + done));
    if (n > 0) {
      done += static_cast<uint64_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // an error, or the end of a file that is now shorter
    }
  }
  // Checked after the read: a write or truncation that came before it (or during it) has moved
  // the file's times by now.
  if (done == bytes && SameStamp(StampNow(), opened_)) return;
  std::memset(to, 0, bytes);
  changed_.store(true, std::memory_order_release);
}

ModelFile::~ModelFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ModelFile::ParseHeader(bool verify_checksums) {
  const std::string where = absl::StrCat("model file '", path_, "'");
  if (size_ < kPreambleSize) {
    return absl::DataLossError(absl::StrCat(where, " is truncated: ", size_,
                                            " bytes, less than the 24-byte preamble"));
  }
  if (std::memcmp(base_, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " is not a Glossa model file (bad magic; expected \"GLOSSAMF\"). Convert Hugging "
               "Face models with model_tools/glossa-convert"));
  }
  const uint32_t version = ReadLE<uint32_t>(base_ + 8);
  if (version > kModelFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " has format version ", version, ", newer than this build reads (",
        kModelFormatVersion, "): upgrade Glossa or convert the model with a matching converter"));
  }
  if (version == 0) return absl::InvalidArgumentError(absl::StrCat(where, " has format version 0"));
  const uint32_t header_crc = ReadLE<uint32_t>(base_ + 12);
  const uint64_t header_size = ReadLE<uint64_t>(base_ + 16);
  if (header_size > size_ - kPreambleSize) {
    return absl::DataLossError(absl::StrCat(where, " is truncated: ", size_,
                                            " bytes, but its header alone needs ", header_size,
                                            " bytes after the 24-byte preamble"));
  }
  const uint8_t* header = base_ + kPreambleSize;
  if (Crc32(header, header_size) != header_crc) {
    return absl::DataLossError(absl::StrCat(where, ": header checksum mismatch (file corrupted)"));
  }
  // Refused while parsing (found with the fuzz targets): nesting deeper than 64 levels (nlohmann's
  // copy and dump recurse once per level: a header nested 50,000 deep overflowed the stack in
  // ParseModelInfo), and fractional numbers of magnitude 2^31 or more (ParseModelInfo's get<int>()
  // of 1e300 is undefined behaviour).
  const char* refused = nullptr;
  header_ = nlohmann::json::parse(
      header, header + header_size,
      [&refused](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth > 64) refused = "is nested more than 64 levels deep";
        if (event == nlohmann::json::parse_event_t::value && parsed.is_number_float() &&
            !(std::fabs(parsed.get<double>()) < 2147483648.0)) {
          refused = "holds a fractional number too large for any of its fields";
        }
        return refused == nullptr;
      },
      /*allow_exceptions=*/false);
  if (refused != nullptr) return absl::DataLossError(absl::StrCat(where, ": header ", refused));
  if (header_.is_discarded() || !header_.is_object() || !header_.contains("tensors") ||
      !header_["tensors"].is_array()) {
    return absl::DataLossError(absl::StrCat(where, ": header is not valid JSON with a tensor list"));
  }
  GLOSSA_RETURN_IF_ERROR(CheckSize(where));
  std::vector<Check> checks;
  for (const auto& entry : header_["tensors"]) {
    absl::Status s = AddTensor(entry, checks);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  }
  if (!verify_checksums) return absl::OkStatus();
  absl::Status s = VerifyChecksums(checks);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  return absl::OkStatus();
}

absl::Status ModelFile::CheckSize(const std::string& where) const {
  uint64_t expected = 0;
  std::string last;
  for (const auto& entry : header_["tensors"]) {
    if (!entry.is_object()) continue;
    const auto offset = entry.find("offset"), size = entry.find("size");
    if (offset == entry.end() || size == entry.end() || !offset->is_number_unsigned() ||
        !size->is_number_unsigned()) {
      continue;  // AddTensor names what is wrong with the entry
    }
    const uint64_t begin = offset->get<uint64_t>(), bytes = size->get<uint64_t>();
    if (bytes > UINT64_MAX - begin || begin + bytes <= expected) continue;
    expected = begin + bytes;
    const auto name = entry.find("name");
    last = name != entry.end() && name->is_string() ? name->get<std::string>() : "";
  }
  if (expected <= size_) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(where, " is truncated: ", size_, " bytes, but its header "
                                          "lists tensors up to byte ", expected, " (tensor '",
                                          last, "'), so it should be ", expected, " bytes"));
}

absl::Status ModelFile::VerifyChecksums(const std::vector<Check>& checks) const {
  // One sum per (offset, size): aliases are summed once; keyed by both, since an entry claiming
  // the offset of another with a larger size must still have its own bytes checked.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, size_t> range_of;
  std::vector<ByteRange> ranges;
  for (const Check& c : checks) {
    if (range_of.emplace(std::make_pair(c.offset, c.size), ranges.size()).second) {
      ranges.push_back({base_ + c.offset, c.size});
    }
  }
  // Each piece is read once to check it; loading reads it again (or copies it), so the whole
  // file never needs to be in this process's memory at once.
  const int threads = checksum_threads_ > 0
                          ? checksum_threads_
                          : static_cast<int>(std::min(8u, std::thread::hardware_concurrency()));
  const std::vector<uint32_t> crcs =
      Crc32Ranges(ranges, threads,
                  [this](ByteRange piece) { DropPages(piece.data, piece.size); });
  for (const Check& c : checks) {
    if (crcs[range_of.at(std::make_pair(c.offset, c.size))] != c.crc) {
      return absl::DataLossError(
          absl::StrCat("checksum mismatch in tensor '", c.tensor, "' (file corrupted)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelFile::AddTensor(const nlohmann::json& entry, std::vector<Check>& checks) {
  TensorView t;
  uint64_t offset = 0;
  uint32_t crc = 0;
  std::string dtype;
  // Whole numbers only (found by fuzzing): get<uint64_t>() of -1.5 is undefined behaviour.
  for (const char* key : {"shape", "offset", "size", "crc32"}) {
    const auto it = entry.is_object() ? entry.find(key) : entry.end();
    if (it == entry.end()) continue;
    bool fractional = false;
    for (const nlohmann::json& v : *it) fractional = fractional || v.is_number_float();
    if (fractional) {
      return absl::DataLossError(absl::StrCat("tensor entry field '", key, "' is not whole"));
    }
  }
  try {
    t.name = entry.at("name").get<std::string>();
    dtype = entry.at("dtype").get<std::string>();
    t.shape = entry.at("shape").get<std::vector<int64_t>>();
    offset = entry.at("offset").get<uint64_t>();
    t.size_bytes = entry.at("size").get<uint64_t>();
    crc = entry.at("crc32").get<uint32_t>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("malformed tensor entry ", entry.dump().substr(0, 200),
                                            ": ", e.what()));
  }
  GLOSSA_ASSIGN_OR_RETURN(t.dtype, ParseDType(dtype, t.name));
  // No prefix of the shape may hold more elements than the file has bytes, so that NumElements()
  // and the size check below cannot overflow (a shape [2^32, 2^32] of 0 bytes passed before).
  uint64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || d > (int64_t{1} << 40) ||
        (d > 0 && elements > size_ / static_cast<uint64_t>(d))) {
      return absl::DataLossError(absl::StrCat("tensor '", t.name, "' has an invalid shape"));
    }
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t element = DTypeSize(t.dtype);
  if (static_cast<uint64_t>(t.NumElements()) * element != t.size_bytes) {
    return absl::DataLossError(absl::StrCat("tensor '", t.name, "' of shape ", t.ShapeString(),
                                            " and dtype ", dtype, " cannot hold ", t.size_bytes,
                                            " bytes"));
  }
  if (offset % kAlignment != 0) {
    return absl::DataLossError(
        absl::StrCat("tensor '", t.name, "' starts at offset ", offset, ", not 64-byte aligned"));
  }
  if (offset > size_ || t.size_bytes > size_ - offset) {
    return absl::DataLossError(absl::StrCat("tensor '", t.name, "' (bytes ", offset, "..",
                                            offset + t.size_bytes, ") extends past the end of the ",
                                            size_, "-byte file: the file is truncated"));
  }
  t.data = base_ + offset;
  checks.push_back({t.name, offset, t.size_bytes, crc});
  if (!tensors_.emplace(t.name, t).second) {
    return absl::DataLossError(absl::StrCat("tensor '", t.name, "' is listed twice"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const TensorView*> ModelFile::Tensor(absl::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(
        absl::StrCat("model file '", path_, "' is missing tensor '", name, "'"));
  }
  return &it->second;
}

absl::StatusOr<const float*> ModelFile::FloatTensor(absl::string_view name,
                                                    const std::vector<int64_t>& shape) const {
  GLOSSA_ASSIGN_OR_RETURN(const TensorView* t, Tensor(name));
  TensorView expected;
  expected.shape = shape;
  if (t->dtype != DType::kFloat32 || t->shape != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path_, "': tensor '", name, "' has shape ", t->ShapeString(),
                     t->dtype == DType::kFloat32 ? "" : " (not float32)", ", expected ",
                     expected.ShapeString(), " float32"));
  }
  return t->f32();
}

absl::StatusOr<const float*> ModelFile::OwnedFloatTensor(absl::string_view name,
                                                         const std::vector<int64_t>& shape) const {
  GLOSSA_ASSIGN_OR_RETURN(const float* mapped, FloatTensor(name, shape));
  GLOSSA_ASSIGN_OR_RETURN(const TensorView* t, Tensor(name));
  absl::MutexLock lock(&owned_mu_);
  std::unique_ptr<float[]>& copy = owned_[std::make_pair(static_cast<const void*>(mapped),
                                                        t->size_bytes)];
  if (copy == nullptr) {
    copy.reset(new float[static_cast<size_t>(t->NumElements())]);
    std::memcpy(copy.get(), mapped, t->size_bytes);
  }
  return copy.get();
}

absl::StatusOr<std::string> ModelFile::Bytes(absl::string_view name) const {
  GLOSSA_ASSIGN_OR_RETURN(const TensorView* t, Tensor(name));
  return std::string(static_cast<const char*>(t->data), t->size_bytes);
}

}  // namespace glossa
