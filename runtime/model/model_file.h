// Reads a Glossa model file: a preamble, a JSON header and 64-byte-aligned tensors, mapped
// read-only while a model loads. See model_tools/glossa_model.py for the writer and the format.
//
//   [0,8) "GLOSSAMF"  [8,12) u32 format version  [12,16) u32 crc32(header)  [16,24) u64 header size
//   [24, 24+size) JSON header   ... tensors at absolute 64-byte-aligned offsets
//
// Open() validates everything before anyone reads a weight: preamble, version, header checksum,
// the file's size against the end of its last tensor, every tensor's bounds, size and crc32.
// Errors name the problem and the file.
//
// A file can be overwritten in place while it is open (`cp new.glossa served.glossa` truncates
// and rewrites the same inode): a read through the mapping past the new end of the file raises
// SIGBUS, and one before it sees the new bytes. So once a model is loaded nothing reads the
// mapping: what is read in place (norms, biases, position tables) is copied out at load
// (OwnedFloatTensor), Unmap() then leaves the mapping's addresses inaccessible, and what stays
// in the file (embedding rows, a deferred output projection) is read with CopyOut, which notices
// a file that changed since Open (size, modification or status-change time) and reports it
// (changed()) instead of returning the new bytes.
#ifndef GLOSSA_RUNTIME_MODEL_MODEL_FILE_H_
#define GLOSSA_RUNTIME_MODEL_MODEL_FILE_H_

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace glossa {

inline constexpr uint32_t kModelFormatVersion = 1;

// Storage types of tensors. bfloat16: raw bf16 bit patterns (uint16, little-endian); int8: signed
// bytes (quantized weights, with a float32 "<name>.scale" tensor per output row).
enum class DType { kFloat32, kBFloat16, kInt8, kBytes };

// Bytes per element.
inline uint64_t DTypeSize(DType t) {
  return t == DType::kFloat32 ? 4 : t == DType::kBFloat16 ? 2 : 1;
}
const char* DTypeName(DType t);

struct TensorView {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t size_bytes = 0;

  const float* f32() const { return static_cast<const float*>(data); }
  int64_t NumElements() const;
  std::string ShapeString() const;
};

class ModelFile {
 public:
  // Maps and validates `path`. With verify_checksums false the tensor crc32s are not computed
  // (bounds and sizes are still checked). They are computed on up to `checksum_threads` threads
  // (0: one per core, at most 8).
  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path,
                                                         bool verify_checksums = true,
                                                         int checksum_threads = 0);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const { return path_; }
  const nlohmann::json& header() const { return header_; }
  uint64_t size_bytes() const { return size_; }

  // A tensor by name; NOT_FOUND names the tensor and the file.
  absl::StatusOr<const TensorView*> Tensor(absl::string_view name) const;
  // A float tensor with exactly this shape; INVALID_ARGUMENT says what was found instead.
  absl::StatusOr<const float*> FloatTensor(absl::string_view name,
                                           const std::vector<int64_t>& shape) const;
  // FloatTensor's values copied into memory this ModelFile owns (once per tensor; aliases share
  // the copy): for tensors read in place after the load, which must not depend on the file.
  // Thread-safe.
  absl::StatusOr<const float*> OwnedFloatTensor(absl::string_view name,
                                                const std::vector<int64_t>& shape) const;
  absl::StatusOr<std::string> Bytes(absl::string_view name) const;
  bool Has(absl::string_view name) const { return tensors_.contains(name); }
  // Drops this process's pages of [data, data + bytes) when that range lies in the mapping (does
  // nothing otherwise, or after Unmap): the memory stops counting in its RSS, and a later read
  // maps the page again from the page cache (or the disk). For weights that were copied into
  // another layout.
  void DropPages(const void* data, uint64_t bytes) const;
  // The same for the whole file.
  void DropAllPages() const { DropPages(base_, size_); }
  // Ends the mapping once a model is loaded: its address range stays reserved but inaccessible
  // (tensor pointers keep naming their bytes for CopyOut, and a read through one faults at once
  // rather than when the file is next truncated), and none of the file's pages stays in this
  // process.
  void Unmap();
  // OK while the file is as Open found it (size, modification and status-change times);
  // DATA_LOSS naming the file otherwise. For the end of a load, whose reads went through the
  // mapping.
  absl::Status CheckUnchanged() const;
  // Copies [data, data + bytes), a range of the mapping, into `out` by reading the file (pread),
  // so that none of its pages is mapped into this process. For weights read a little at a time
  // and left in the file (embedding rows, the output projection's candidate slabs): reading
  // them through the mapping maps each page's whole page-cache folio (up to 2 MB on Linux 6.x
  // with large folios: an OPUS-MT big step's ten 256 KB candidate slabs map ~20 MB), which stays
  // in the RSS. When the file changed since Open, or the read fails or comes up short, `out` is
  // zeroed and changed() is true from then on. A range outside the mapping is copied with
  // memcpy.
  void CopyOut(const void* data, uint64_t bytes, void* out) const;
  // Whether a CopyOut found the file changed since Open (or could not read it): what was read
  // since may be wrong, and a model made from this file must translate no more.
  bool changed() const { return changed_.load(std::memory_order_acquire); }
  // DATA_LOSS naming the file and how it changed, for the requests refused once changed().
  absl::Status ChangedError() const;

 private:
  ModelFile() = default;
  absl::Status ParseHeader(bool verify_checksums);
  // DATA_LOSS when the file is shorter than the end of the last tensor the header lists,
  // naming the file, its size and the size the header calls for.
  absl::Status CheckSize(const std::string& where) const;
  // A tensor's bytes and the crc32 its entry claims.
  struct Check {
    std::string tensor;
    uint64_t offset, size;
    uint32_t crc;
  };
  absl::Status AddTensor(const nlohmann::json& entry, std::vector<Check>& checks);
  // Sums every checked range once (aliases share one sum), on all cores; the first mismatch in
  // header order is the error.
  absl::Status VerifyChecksums(const std::vector<Check>& checks) const;

  // A file's size, modification and status-change times (fstat).
  struct Stamp {
    uint64_t size = 0;
    timespec mtime{}, ctime{};
  };
  static bool SameStamp(const Stamp& a, const Stamp& b);
  Stamp StampNow() const;  // the open file's, as fstat gives it at this moment

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;  // kept open for CopyOut
  Stamp opened_;  // the file as Open found it
  bool mapped_ = false;  // base_ maps the file (false after Unmap)
  mutable std::atomic<bool> changed_{false};
  mutable absl::Mutex owned_mu_;
  // OwnedFloatTensor's copies, by the tensor's address in the mapping and its size.
  mutable absl::flat_hash_map<std::pair<const void*, uint64_t>, std::unique_ptr<float[]>> owned_
      ABSL_GUARDED_BY(owned_mu_);
  int checksum_threads_ = 0;
  nlohmann::json header_;
  absl::flat_hash_map<std::string, TensorView> tensors_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_MODEL_MODEL_FILE_H_
