// Damaged model files are refused at load with a message naming the problem.
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/test_util.h"
#include "engine/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checksums.h"
#include "model/model_file.h"
#include "util/threads.h"

namespace glossa {
namespace {

using ::testing::HasSubstr;

// The parallel, piecewise crc32 equals zlib's whole-range crc32 (ranges longer than a piece
// included, so the pieces' sums are combined), and every byte is reported summed exactly once.
TEST(Crc32RangesTest, EqualsZlibAndReportsEveryByteOnce) {
  std::vector<uint8_t> bytes((uint64_t{40} << 20) + 12345);
  std::mt19937 rng(3);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const std::vector<ByteRange> ranges = {{bytes.data(), 0},
                                         {bytes.data() + 1, 17},
                                         {bytes.data() + 100, (uint64_t{33} << 20) + 5},
                                         {bytes.data(), bytes.size()}};
  for (int threads : {1, 2, 5}) {
    std::vector<int> summed(bytes.size(), 0);
    std::mutex mu;
    const std::vector<uint32_t> crcs = Crc32Ranges(ranges, threads, [&](ByteRange piece) {
      std::lock_guard<std::mutex> lock(mu);
      for (uint64_t i = 0; i < piece.size; ++i) summed[piece.data - bytes.data() + i]++;
    });
    ASSERT_EQ(crcs.size(), ranges.size());
    for (size_t r = 0; r < ranges.size(); ++r) {
      const uint32_t zlib = static_cast<uint32_t>(
          crc32(crc32(0L, Z_NULL, 0), ranges[r].data, static_cast<uInt>(ranges[r].size)));
      EXPECT_EQ(crcs[r], zlib) << "range " << r << ", " << threads << " threads";
    }
    // Ranges 1..3 overlap: byte i is reported once per range that holds it.
    for (uint64_t i : {uint64_t{0}, uint64_t{5}, uint64_t{150}, bytes.size() - 1}) {
      int expected = 0;
      for (const ByteRange& range : ranges) {
        expected += bytes.data() + i >= range.data && bytes.data() + i < range.data + range.size;
      }
      EXPECT_EQ(summed[i], expected) << "byte " << i;
    }
  }
}

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::DemoModelPath());
    ASSERT_GT(original_.size(), 1000u) << "demo model missing: " << testing::DemoModelPath();
    path_ = ::testing::TempDir() + "/damaged_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".glossa";
  }
  void TearDown() override { std::remove(path_.c_str()); }

  // Loads `bytes` as a model file and returns the error (the test fails if it loads).
  absl::Status LoadBytes(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary) << bytes;
    auto model = Model::Load(path_);
    EXPECT_FALSE(model.ok()) << "a damaged file loaded";
    return model.ok() ? absl::OkStatus() : model.status();
  }

  uint64_t HeaderSize() const {
    uint64_t n;
    std::memcpy(&n, original_.data() + 16, 8);
    return n;
  }
  nlohmann::json Header() const { return nlohmann::json::parse(original_.substr(24, HeaderSize())); }
  // The header less its optional "name", leaving room for edits that lengthen it.
  nlohmann::json RoomyHeader() const {
    nlohmann::json header = Header();
    header.erase("name");
    return header;
  }

  // The original file with a new JSON header of the same size (padded with spaces) and checksum.
  std::string WithHeader(const nlohmann::json& header) const {
    std::string text = header.dump();
    EXPECT_LE(text.size(), HeaderSize());
    text.resize(HeaderSize(), ' ');
    std::string bytes = original_;
    bytes.replace(24, text.size(), text);
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
    std::memcpy(&bytes[12], &crc, 4);
    return bytes;
  }

  std::string original_;
  std::string path_;
};

TEST_F(ModelFileTest, TheDemoModelLoads) {
  auto model = Model::Load(testing::DemoModelPath());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().d_model, 256);
}

TEST_F(ModelFileTest, MissingFileIsNotFound) {
  auto model = Model::Load("/nonexistent/model.glossa");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(model.status().message(), HasSubstr("/nonexistent/model.glossa"));
}

TEST_F(ModelFileTest, TruncatedPreamble) {
  const absl::Status s = LoadBytes(original_.substr(0, 10));
  EXPECT_THAT(s.message(), HasSubstr(path_ + "' is truncated: 10 bytes"));
}

// A file cut short (a copy that stopped half way) is refused with its size and the size its
// header calls for: the file ends right after its last tensor.
TEST_F(ModelFileTest, TruncatedTensors) {
  for (const size_t size : {original_.size() / 2, original_.size() - 1}) {
    const absl::Status s = LoadBytes(original_.substr(0, size));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("model file '", path_, "' is truncated: ",
                                                    size, " bytes")));
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("should be ", original_.size(), " bytes")));
  }
}

TEST_F(ModelFileTest, TruncatedHeader) {
  const absl::Status s = LoadBytes(original_.substr(0, 100));
  EXPECT_THAT(s.message(), HasSubstr(path_ + "' is truncated: 100 bytes, but its header alone"));
}

TEST_F(ModelFileTest, BitFlipInATensor) {
  std::string bytes = original_;
  bytes[bytes.size() - 1000] ^= 0x10;
  const absl::Status s = LoadBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("checksum mismatch in tensor"));
}

// A load bounded to one thread (a server loading beside traffic) still checks every tensor, and
// gives the caller back its own OpenMP team size.
TEST_F(ModelFileTest, ALoadOnOneThreadChecksEveryTensorAndKeepsTheCallersTeam) {
  const int before = ComputeThreads();
  SetComputeThreads(before + 1);
  ModelOptions one_thread;
  one_thread.load_threads = 1;
  auto model = Model::Load(testing::DemoModelPath(), one_thread);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(ComputeThreads(), before + 1);
  std::string bytes = original_;
  bytes[bytes.size() - 1000] ^= 0x10;
  std::ofstream(path_, std::ios::binary) << bytes;
  auto damaged = Model::Load(path_, one_thread);
  ASSERT_FALSE(damaged.ok());
  EXPECT_THAT(damaged.status().message(), HasSubstr("checksum mismatch in tensor"));
  EXPECT_EQ(ComputeThreads(), before + 1);
  SetComputeThreads(before);
}

TEST_F(ModelFileTest, BitFlipInTheHeader) {
  std::string bytes = original_;
  bytes[40] ^= 0x01;
  EXPECT_THAT(LoadBytes(bytes).message(), HasSubstr("header checksum mismatch"));
}

TEST_F(ModelFileTest, WrongMagic) {
  std::string bytes = original_;
  bytes[0] = 'X';
  const absl::Status s = LoadBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not a Glossa model file"));
}

TEST_F(ModelFileTest, FutureVersion) {
  std::string bytes = original_;
  const uint32_t version = 7;
  std::memcpy(&bytes[8], &version, 4);
  const absl::Status s = LoadBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("format version 7, newer than this build reads"));
}

TEST_F(ModelFileTest, MissingTensor) {
  nlohmann::json header = Header();
  auto& tensors = header["tensors"];
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i]["name"] == "decoder.layers.2.fc2.bias") tensors.erase(i);
  }
  const absl::Status s = LoadBytes(WithHeader(header));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing tensor 'decoder.layers.2.fc2.bias'"));
}

TEST_F(ModelFileTest, WrongShape) {
  nlohmann::json header = Header();
  for (auto& t : header["tensors"]) {
    if (t["name"] == "encoder.layers.1.fc1.weight") t["shape"] = {256, 1024};
  }
  const absl::Status s = LoadBytes(WithHeader(header));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'encoder.layers.1.fc1.weight' has shape [256,1024], "
                                     "expected [1024,256]"));
}

TEST_F(ModelFileTest, SizeThatDoesNotMatchTheShape) {
  nlohmann::json header = Header();
  for (auto& t : header["tensors"]) {
    if (t["name"] == "final_logits_bias") t["shape"] = {15316};
  }
  EXPECT_THAT(LoadBytes(WithHeader(header)).message(), HasSubstr("cannot hold"));
}

TEST_F(ModelFileTest, UnsupportedConfigValueIsNamed) {
  nlohmann::json header = Header();
  header["config"]["activation"] = "mish";
  EXPECT_THAT(LoadBytes(WithHeader(header)).message(), HasSubstr("config.activation 'mish'"));
}

TEST_F(ModelFileTest, ForcedEosOutsideTheVocabularyIsRefused) {
  nlohmann::json header = RoomyHeader();
  header["generation"]["forced_eos_token_id"] = 99999;  // the decoder would write past the row
  const absl::Status s = LoadBytes(WithHeader(header));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("forced_eos_token_id 99999 is outside"));
}

TEST_F(ModelFileTest, ConfigIntegerBeyondIntIsRefusedNotWrapped) {
  nlohmann::json header = RoomyHeader();
  header["config"]["d_model"] = (uint64_t{1} << 32) + 256;  // get<int>() would read 256
  const absl::Status s = LoadBytes(WithHeader(header));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("4294967552 is outside the range of int"));
}

TEST_F(ModelFileTest, EntryAtAnotherTensorsOffsetHasItsOwnBytesChecked) {
  // The second tensor claims the first one's offset and checksum, with its own (equal or
  // larger) size: the checksum must be computed over its own bytes, not reused by offset.
  nlohmann::json header = RoomyHeader();
  auto& tensors = header["tensors"];
  nlohmann::json& first = tensors[3];  // encoder.embed_positions.weight, 512 KiB
  nlohmann::json* larger = nullptr;
  for (size_t i = 4; i < tensors.size() && larger == nullptr; ++i) {
    if (tensors[i]["size"].get<uint64_t>() > first["size"].get<uint64_t>()) larger = &tensors[i];
  }
  ASSERT_NE(larger, nullptr);
  (*larger)["offset"] = first["offset"];
  (*larger)["crc32"] = first["crc32"];
  EXPECT_THAT(LoadBytes(WithHeader(header)).message(), HasSubstr("checksum mismatch"));
}

TEST_F(ModelFileTest, HeaderThatIsNotJson) {
  nlohmann::json header = Header();
  std::string bytes = WithHeader(header);
  bytes[24] = '#';
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + 24), static_cast<uInt>(HeaderSize())));
  std::memcpy(&bytes[12], &crc, 4);
  EXPECT_THAT(LoadBytes(bytes).message(), HasSubstr("not valid JSON"));
}

// Whether this process has the page holding `p` mapped (/proc/self/pagemap's present bit; -1
// when it cannot be read).
int PagePresent(const void* p) {
  FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return -1;
  const uint64_t page = reinterpret_cast<uintptr_t>(p) / 4096;
  uint64_t entry = 0;
  const bool ok = std::fseek(f, static_cast<long>(page * 8), SEEK_SET) == 0 &&
                  std::fread(&entry, 8, 1, f) == 1;
  std::fclose(f);
  return ok ? static_cast<int>(entry >> 63) : -1;
}

// CopyOut reads the file's bytes without mapping them into the process (a read through the
// mapping does map them: the check can fail), and copies a range outside the mapping with memcpy.
TEST_F(ModelFileTest, CopyOutReadsTheFileWithoutMappingIt) {
  auto file = ModelFile::Open(testing::DemoModelPath(), /*verify_checksums=*/false);
  ASSERT_TRUE(file.ok()) << file.status();
  auto table = (*file)->Tensor("decoder.embed_tokens.weight");
  ASSERT_TRUE(table.ok()) << table.status();
  uint64_t offset = 0;
  for (const auto& entry : (*file)->header()["tensors"]) {
    if (entry["name"] == "decoder.embed_tokens.weight") offset = entry["offset"].get<uint64_t>();
  }
  ASSERT_GT(offset, 0u);
  const int64_t dim = (*table)->shape[1];
  const uint64_t row_bytes = dim * 4, first = 1000 * row_bytes, bytes = 3 * row_bytes + 5;
  ASSERT_LE(first + bytes, (*table)->size_bytes);
  const auto* mapped = static_cast<const uint8_t*>((*table)->data) + first;
  (*file)->DropAllPages();
  std::vector<uint8_t> out(bytes);
  (*file)->CopyOut(mapped, bytes, out.data());
  EXPECT_EQ(std::memcmp(out.data(), original_.data() + offset + first, bytes), 0);
  const int before = PagePresent(mapped);
  if (before < 0) GTEST_SKIP() << "/proc/self/pagemap cannot be read here: residency unchecked";
  EXPECT_EQ(before, 0) << "CopyOut mapped the page it copied";
  EXPECT_EQ(std::memcmp(mapped, out.data(), bytes), 0);  // through the mapping: maps it
  EXPECT_EQ(PagePresent(mapped), 1);

  const std::vector<uint8_t> heap = {1, 2, 3, 4, 5};
  std::vector<uint8_t> copy(5);
  (*file)->CopyOut(heap.data(), heap.size(), copy.data());
  EXPECT_EQ(copy, heap);
}

}  // namespace
}  // namespace glossa
