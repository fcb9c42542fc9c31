// The reduced-precision compute types: number formats (ops/quantize.h), Linear in bfloat16 and int8
// against float32, and loading a model with a compute type.
#include "ops/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gtest/gtest.h"
#include "ops/linear.h"

namespace glossa {
namespace {

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(Bf16Test, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(quant::FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(quant::FloatToBf16(Bits(0x3F808000)), 0x3F80);  // tie, even below: stays
  EXPECT_EQ(quant::FloatToBf16(Bits(0x3F818000)), 0x3F82);  // tie, odd below: rounds up
  EXPECT_EQ(quant::FloatToBf16(Bits(0x3F808001)), 0x3F81);  // above the tie
  EXPECT_EQ(quant::FloatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(quant::FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(quant::Bf16ToFloat(quant::FloatToBf16(std::nanf("")))));
  EXPECT_EQ(quant::Bf16ToFloat(0x3FC0), 1.5f);
}

bool HaveAvx512() { return __builtin_cpu_supports("avx512f"); }

TEST(HalfTest, RoundsToNearestEvenAndRefusesWhatDoesNotFit) {
  if (!HaveAvx512()) GTEST_SKIP() << "FloatToHalf converts with AVX-512 only (false elsewhere)";
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1.0);
  // 1 + 3 * 2^-11 halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up. 2^-24 is the smallest
  // subnormal. 19 values: a full vector of 16 and a tail of 3.
  const std::vector<float> x = {1.0f,
                                1.0f + 0x1p-11f,
                                1.0f + 3 * 0x1p-11f,
                                -2.5f,
                                0x1p-24f,
                                0x1p-14f,
                                65504.0f,
                                -65504.0f,
                                0.0f,
                                -0.0f,
                                0.1f,
                                1000.0f,
                                0x1p-25f,
                                3.0f,
                                -1.0f,
                                0.5f,
                                7.0f,
                                -0x1p-24f,
                                2048.0f};
  const std::vector<uint16_t> expected = {0x3C00, 0x3C00, 0x3C02, 0xC100, 0x0001, 0x0400, 0x7BFF,
                                          0xFBFF, 0x0000, 0x8000, 0x2E66, 0x63D0, 0x0000, 0x4200,
                                          0xBC00, 0x3800, 0x4700, 0x8001, 0x6800};
  std::vector<uint16_t> h(x.size());
  ASSERT_TRUE(quant::FloatToHalf(x.data(), static_cast<int64_t>(x.size()), h.data()));
  EXPECT_EQ(h, expected);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(quant::FloatToHalf(&x[i], 1, &h[i]), true);
    EXPECT_EQ(h[i], expected[i]) << i;
  }
  // Widened back: every half is a float exactly.
  EXPECT_EQ(quant::HalfToFloat(0x3C02), 1.0f + 0x1p-9f);
  EXPECT_EQ(quant::HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(quant::HalfToFloat(0x8001), -0x1p-24f);
  EXPECT_EQ(quant::HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(quant::HalfToFloat(0x2E66), 0.0999755859375f);
  EXPECT_EQ(quant::HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(quant::HalfToFloat(0x7E00)));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {  // every finite half survives the round trip
    const float f = quant::HalfToFloat(static_cast<uint16_t>(bits));
    if (!std::isfinite(f)) continue;
    uint16_t back;
    ASSERT_TRUE(quant::FloatToHalf(&f, 1, &back));
    ASSERT_EQ(back, bits) << bits;
  }
  // Beyond the largest half, infinite or NaN, anywhere in a row: refused.
  for (float bad : {65520.0f, -70000.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    for (size_t at : {size_t{0}, size_t{15}, size_t{18}}) {
      std::vector<float> y = x;
      y[at] = bad;
      EXPECT_FALSE(quant::FloatToHalf(y.data(), static_cast<int64_t>(y.size()), h.data()))
          << bad << " at " << at;
    }
  }
}

TEST(Int8Test, WeightRowsAreSymmetricPerRow) {
  const std::vector<float> w = {0.5f, -1.27f, 0.005f, 0.0f,  // max 1.27: scale 0.01
                                0.0f, 0.0f,   0.0f,   0.0f,  // all zero: scale 1
                                2.0f, 1.0f,   0.5f,   -0.25f};
  std::vector<int8_t> q(w.size());
  std::vector<float> scales(3);
  quant::QuantizeWeightRows(w.data(), 3, 4, q.data(), scales.data());
  EXPECT_FLOAT_EQ(scales[0], 1.27f / 127.0f);
  EXPECT_EQ(scales[1], 1.0f);
  EXPECT_FLOAT_EQ(scales[2], 2.0f / 127.0f);
  EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 4), (std::vector<int>{50, -127, 0, 0}));
  EXPECT_EQ(std::vector<int>(q.begin() + 4, q.begin() + 8), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int>(q.begin() + 8, q.end()), (std::vector<int>{127, 64, 32, -16}));
}

TEST(Int8Test, ActivationRowsUseTheirOwnRangeAndZeroPoint) {
  // 37 columns: the vector path's masked tail is exercised too.
  constexpr int kCols = 37;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(3 * kCols);
  for (int c = 0; c < kCols; ++c) {
    x[c] = std::fabs(uniform(rng));      // row 0: all positive
    x[kCols + c] = -std::fabs(uniform(rng));  // row 1: all negative
    x[2 * kCols + c] = uniform(rng);     // row 2: both signs
  }
  std::vector<uint8_t> q(x.size());
  float scales[3];
  int32_t zero_points[3];
  quant::QuantizeActivationRows(x.data(), 3, kCols, q.data(), scales, zero_points);
  EXPECT_EQ(zero_points[0], 0);
  EXPECT_EQ(zero_points[1], 255);
  EXPECT_GT(zero_points[2], 0);
  EXPECT_LT(zero_points[2], 255);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const float back = (static_cast<int>(q[r * kCols + c]) - zero_points[r]) * scales[r];
      EXPECT_NEAR(back, x[r * kCols + c], 0.5001f * scales[r]) << "row " << r << " col " << c;
    }
  }
}

TEST(Int8Test, ResidualCodesCarryWhatTheFirstCodesRoundedOff) {
  constexpr int kRows = 3, kCols = 37;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(kRows * kCols);
  for (float& v : x) v = normal(rng);
  x[5] = 40.0f;  // one outlier: a coarse first code, which the residual refines
  std::vector<uint8_t> alone(x.size()), both(2 * x.size());
  float scales[kRows], scales2[kRows];
  int32_t zero_points[kRows], zero_points2[kRows];
  quant::QuantizeActivationRows(x.data(), kRows, kCols, alone.data(), scales, zero_points);
  quant::QuantizeActivationRows(x.data(), kRows, kCols, both.data(), scales2, zero_points2,
                                /*residual=*/true);
  // The first codes, scales and zero points are those of the plain quantization.
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), both.begin()));
  EXPECT_TRUE(std::equal(scales, scales + kRows, scales2));
  EXPECT_TRUE(std::equal(zero_points, zero_points + kRows, zero_points2));
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const int i = r * kCols + c;
      const float codes = static_cast<float>(both[i] - zero_points[r]) +
                          static_cast<float>(both[x.size() + i] - quant::kResidualZeroPoint) /
                              quant::kResidualSteps;
      EXPECT_NEAR(codes * scales[r], x[i], scales[r] / 500.0f) << "row " << r << " col " << c;
    }
  }
}

struct Case {
  int64_t in, out, rows;
  Activation activation;
  bool accumulate;
};

// Relative L1 error of a compute type against float32 on random data (returned), and whether
// every row's result is the same computed alone as in the batch.
double CheckAgainstFloat32(ComputeType compute, const Case& c, double max_relative_error) {
  std::mt19937 rng(c.in * 131 + c.out + c.rows);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(c.in * c.out), b(c.out), x(c.rows * c.in), init(c.rows * c.out);
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : b) v = normal(rng);
  for (float& v : x) v = normal(rng);
  for (float& v : init) v = normal(rng);
  const Linear reference(LinearWeights{w.data()}, b.data(), c.in, c.out, c.activation,
                         ComputeType::kFloat32);
  const Linear linear(LinearWeights{w.data()}, b.data(), c.in, c.out, c.activation, compute);
  std::vector<float> expected = init, actual = init;
  reference.Forward(x.data(), c.rows, expected.data(), c.accumulate);
  linear.Forward(x.data(), c.rows, actual.data(), c.accumulate);
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(std::isfinite(actual[i])) << i;
    error += std::fabs(actual[i] - expected[i]);
    norm += std::fabs(expected[i]);
  }
  EXPECT_LT(error / norm, max_relative_error)
      << ComputeTypeName(compute) << " in " << c.in << " out " << c.out << " rows " << c.rows;
  // Row independence: the last row alone gives exactly what it gave in the batch.
  std::vector<float> alone(init.end() - c.out, init.end());
  linear.Forward(x.data() + (c.rows - 1) * c.in, 1, alone.data(), c.accumulate);
  EXPECT_EQ(0, std::memcmp(alone.data(), actual.data() + (c.rows - 1) * c.out,
                           c.out * sizeof(float)))
      << ComputeTypeName(compute) << " in " << c.in << " out " << c.out << " rows " << c.rows
      << ": the last row alone differs from the same row in the batch";
  return error / norm;
}

TEST(ComputeTypeTest, Int8AndBf16StayCloseToFloat32) {
  const Case cases[] = {
      {256, 256, 1, Activation::kNone, false},   {256, 1024, 32, Activation::kSwish, false},
      {1024, 256, 70, Activation::kNone, true},  {37, 19, 5, Activation::kRelu, false},
      {64, 96, 3, Activation::kGelu, false},      {256, 15315, 2, Activation::kNone, false},
      {40, 24, 4, Activation::kGeluTanh, false},
  };
  for (const Case& c : cases) {
    CheckAgainstFloat32(ComputeType::kBFloat16, c, 0.005);
    CheckAgainstFloat32(ComputeType::kInt8Fast, c, 0.02);
    CheckAgainstFloat32(ComputeType::kInt8, c, 0.02);
  }
}

// Relative L1 distance of int8 or int8_fast from float32 run on the s8 weights scaled back
// (weights rounded, inputs exact).
double DistanceFromRoundedWeights(ComputeType compute, int64_t in, int64_t out, int64_t rows) {
  std::mt19937 rng(in + out * 7 + rows);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(in * out), x(rows * in), rounded(w.size()), scales(out);
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : x) v = normal(rng);
  std::vector<int8_t> q(w.size());
  quant::QuantizeWeightRows(w.data(), out, in, q.data(), scales.data());
  for (size_t i = 0; i < w.size(); ++i) rounded[i] = q[i] * scales[i / in];
  const Linear reference(rounded.data(), nullptr, in, out);
  const Linear linear(LinearWeights{w.data()}, nullptr, in, out, Activation::kNone, compute);
  std::vector<float> expected(rows * out), actual(rows * out);
  reference.Forward(x.data(), rows, expected.data());
  linear.Forward(x.data(), rows, actual.data());
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    error += std::fabs(actual[i] - expected[i]);
    norm += std::fabs(expected[i]);
  }
  return error / norm;
}

TEST(ComputeTypeTest, Int8ResidualCodesLeaveOnlyTheWeightsRounding) {
  for (const auto& [in, out, rows] : std::vector<std::array<int64_t, 3>>{
           {256, 256, 1}, {1024, 256, 70}, {256, 15315, 3}, {37, 19, 5}}) {
    const double fast = DistanceFromRoundedWeights(ComputeType::kInt8Fast, in, out, rows);
    const double precise = DistanceFromRoundedWeights(ComputeType::kInt8, in, out, rows);
    EXPECT_GT(fast, 1e-3) << in << "x" << out;  // 8-bit inputs: visibly off
    EXPECT_LT(precise, fast / 50) << in << "x" << out;  // measured: 2-3e-5 vs 5-7e-3
  }
}

TEST(ComputeTypeTest, StoredInt8WeightsEqualQuantizingAtLoad) {
  constexpr int64_t kIn = 48, kOut = 20, kRows = 3;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(kIn * kOut), x(kRows * kIn);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  std::vector<int8_t> q(w.size());
  std::vector<float> scales(kOut);
  quant::QuantizeWeightRows(w.data(), kOut, kIn, q.data(), scales.data());
  const Linear from_f32(LinearWeights{w.data()}, nullptr, kIn, kOut, Activation::kNone,
                        ComputeType::kInt8);
  LinearWeights stored;
  stored.s8 = q.data();
  stored.s8_scales = scales.data();
  const Linear from_s8(stored, nullptr, kIn, kOut, Activation::kNone, ComputeType::kInt8);
  std::vector<float> a(kRows * kOut), b(kRows * kOut);
  from_f32.Forward(x.data(), kRows, a.data());
  from_s8.Forward(x.data(), kRows, b.data());
  EXPECT_EQ(a, b);
}

// Pages of [p, p + bytes) present in this process's memory (/proc/self/pagemap's bit 63); -1
// where pagemap cannot be read.
int64_t PresentPages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page;
  std::FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return -1;
  std::vector<uint64_t> entries(last - first);
  const bool ok = std::fseek(f, static_cast<long>(first * 8), SEEK_SET) == 0 &&
                  std::fread(entries.data(), 8, entries.size(), f) == entries.size();
  std::fclose(f);
  if (!ok) return -1;
  int64_t present = 0;
  for (uint64_t e : entries) present += static_cast<int64_t>(e >> 63);
  return present;
}

// float32 weights in a mapped file (as a float32 model file's), converted to int8, int8_fast and
// bfloat16: each slice of output rows is handed to the callback once converted, where a model
// file drops its pages, so that the mapping never holds more than one slice of them (the
// callback counts its present pages before dropping each range) and holds none afterwards; the
// products equal those of the same Linear made from the weights in memory.
TEST(ComputeTypeTest, ConvertingMappedFloat32WeightsMapsOneSliceAtATime) {
  constexpr int64_t kIn = 256, kRows = 5;
  const int64_t slice_rows = Linear::kPackSliceBytes / (kIn * 4);
  const int64_t out = 3 * slice_rows + 100;  // three whole slices and a part
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(kIn * out), x(kRows * kIn);
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : x) v = normal(rng);
  const std::string path = ::testing::TempDir() + "/mapped_float32_weights.bin";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(w.data(), sizeof(float), w.size(), f), w.size());
  ASSERT_EQ(std::fclose(f), 0);
  std::FILE* in = std::fopen(path.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  const size_t bytes = w.size() * sizeof(float);
  void* mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, ::fileno(in), 0);
  std::fclose(in);
  std::remove(path.c_str());
  ASSERT_NE(mapped, MAP_FAILED);
  const auto* weights = static_cast<const float*>(mapped);
  if (PresentPages(weights, bytes) < 0) {
    ::munmap(mapped, bytes);
    GTEST_SKIP() << "/proc/self/pagemap cannot be read here: residency unchecked";
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // A slice's pages, and the kernel's fault-around past its ends: up to a page-cache folio
  // (2 MB with large folios) on either side.
  const int64_t slice_pages = static_cast<int64_t>((Linear::kPackSliceBytes + (4 << 20)) / page);
  for (ComputeType compute :
       {ComputeType::kInt8, ComputeType::kInt8Fast, ComputeType::kBFloat16}) {
    ::madvise(mapped, bytes, MADV_DONTNEED);
    int64_t most_present = 0;
    auto drop = [&](const void* plain, size_t n) {
      most_present = std::max(most_present, PresentPages(weights, bytes));
      const uintptr_t begin = reinterpret_cast<uintptr_t>(plain);
      const uintptr_t base = reinterpret_cast<uintptr_t>(mapped);
      if (begin < base || begin + n > base + bytes) return;  // not the mapped weights
      const uintptr_t from = (begin + page - 1) / page * page, to = (begin + n) / page * page;
      if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
    };
    const Linear from_file(LinearWeights{weights}, nullptr, kIn, out, Activation::kNone, compute,
                           drop);
    const int64_t left = PresentPages(weights, bytes);
    EXPECT_GT(most_present, 0) << ComputeTypeName(compute);  // the callback saw the reads
    EXPECT_LE(most_present, slice_pages)
        << ComputeTypeName(compute) << ": the mapping held more than one slice while converting";
    EXPECT_EQ(left, 0) << ComputeTypeName(compute) << ": pages of the float32 weights left mapped";
    const Linear from_memory(LinearWeights{w.data()}, nullptr, kIn, out, Activation::kNone,
                             compute);
    std::vector<float> a(kRows * out), b(kRows * out);
    from_file.Forward(x.data(), kRows, a.data());
    from_memory.Forward(x.data(), kRows, b.data());
    EXPECT_EQ(a, b) << ComputeTypeName(compute);
    // The converted copy was freed once packed; the plain weights made back from the packed
    // copy (for a primitive that wants them) are the converted ones.
    if (compute == ComputeType::kBFloat16) {
      std::vector<uint16_t> expected(w.size());
      quant::FloatToBf16(w.data(), static_cast<int64_t>(w.size()), expected.data());
      EXPECT_EQ(std::memcmp(from_file.PlainWeights(), expected.data(), w.size() * 2), 0);
    } else {
      std::vector<int8_t> expected(w.size());
      std::vector<float> scales(out);
      quant::QuantizeWeightRows(w.data(), out, kIn, expected.data(), scales.data());
      EXPECT_EQ(std::memcmp(from_file.PlainWeights(), expected.data(), w.size()), 0);
    }
  }
  ::munmap(mapped, bytes);
}

TEST(ComputeTypeTest, ModelLoadsWithEachComputeType) {
  for (const char* name : {"float32", "bfloat16", "int8", "int8_fast"}) {
    ModelOptions options;
    options.compute_type = name;
    auto model = Model::Load(testing::DemoModelPath(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->info().dtype, name);
    EXPECT_EQ((*model)->weights().lm_head->compute_type(),
              (*model)->weights().decoder_layers[0].fc1->compute_type());
  }
  ModelOptions keep_head;
  keep_head.compute_type = "int8";
  keep_head.float32_output_layer = true;
  auto model = Model::Load(testing::DemoModelPath(), keep_head);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->weights().lm_head->compute_type(), ComputeType::kFloat32);
  EXPECT_EQ((*model)->weights().decoder_layers[0].fc1->compute_type(), ComputeType::kInt8);

  ModelOptions bad;
  bad.compute_type = "int4";
  auto refused = Model::Load(testing::DemoModelPath(), bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("int4"), std::string::npos);
}

// int8_fast keeps the decoder's cross-attention keys and values in half precision (with heads
// of 64 on AVX-512); every other compute type keeps float32. The steps then compute exactly what
// they compute from float32 keys and values holding the widened halves.
TEST(ComputeTypeTest, Int8FastKeepsCrossAttentionInHalfPrecision) {
  const std::vector<int> source = {12, 345, 6789, 0}, prefix = {15314, 77, 900, 31};
  for (const char* name : {"float32", "int8", "int8_fast"}) {
    ModelOptions options;
    options.compute_type = name;
    auto model = Model::Load(testing::DemoModelPath(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    const ModelConfig& c = (*model)->config();
    const bool half =
        std::string(name) == "int8_fast" && HaveAvx512() && c.d_model / c.decoder_heads == 64;
    int64_t values = 0;
    const auto as_made =
        testing::TeacherForcedLogits(**model, source, prefix, [&](EncodedBatch& b) {
          EXPECT_EQ(b.cross_kv_half != nullptr, half) << name;
          EXPECT_EQ(b.cross_kv != nullptr, !half) << name;
          values = int64_t{c.decoder_layers} * 2 * b.total_rows * c.d_model;
        });
    EXPECT_EQ(values, int64_t{c.decoder_layers} * 2 * 4 * c.d_model);
    if (!half) continue;
    const auto widened =
        testing::TeacherForcedLogits(**model, source, prefix, [&](EncodedBatch& b) {
          b.cross_kv.reset(new float[values]);
          for (int64_t i = 0; i < values; ++i)
            b.cross_kv[i] = quant::HalfToFloat(b.cross_kv_half[i]);
          b.cross_kv_half.reset();
        });
    ASSERT_EQ(as_made.size(), prefix.size());
    for (size_t t = 0; t < prefix.size(); ++t) {
      ASSERT_EQ(as_made[t], widened[t]) << "step " << t;
      // Not a trivial equality: the first step's output depends on the cross K/V.
      EXPECT_TRUE(std::isfinite(as_made[t][0]));
    }
  }
}

// Keys or values beyond half precision's range (an encoder output scaled up a million times):
// that batch keeps them in float32, exactly the products of the layers' own Linears.
TEST(ComputeTypeTest, Int8FastKeepsFloat32WhereHalfCannotHold) {
  ModelOptions options;
  options.compute_type = "int8_fast";
  auto model = Model::Load(testing::DemoModelPath(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  auto batch = (*model)->encoder().Encode({{12, 345, 6789, 0}, {77, 0}});
  for (float& x : batch->hidden) x *= 1e6f;
  (*model)->decoder().PrecomputeCrossKv(*batch);
  ASSERT_NE(batch->cross_kv, nullptr);
  EXPECT_EQ(batch->cross_kv_half, nullptr);
  const int64_t n = batch->total_rows, d = c.d_model;
  std::vector<float> expected(n * d);
  for (int l = 0; l < c.decoder_layers; ++l) {
    const auto& w = (*model)->weights().decoder_layers[l].cross_attn;
    w.k->Forward(batch->hidden.data(), n, expected.data());
    EXPECT_EQ(std::vector<float>(batch->CrossKey(l, 0), batch->CrossKey(l, 0) + n * d), expected);
    w.v->Forward(batch->hidden.data(), n, expected.data());
    EXPECT_EQ(std::vector<float>(batch->CrossValue(l, 0), batch->CrossValue(l, 0) + n * d),
              expected);
  }
  float largest = 0.0f;
  for (int64_t i = 0; i < c.decoder_layers * 2 * n * d; ++i) {
    largest = std::max(largest, std::abs(batch->cross_kv[i]));
  }
  EXPECT_GT(largest, quant::kHalfMax);  // the case this is about
}

}  // namespace
}  // namespace glossa
