// Ops against naive C++ references on random and edge shapes (relative error <= 1e-5); the fused
// vocabulary kernels against the unfused LogSoftmax, bit for bit.
#include "ops/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "layers/attention.h"
#include "layers/sentence_attention.h"
#include "ops/gemv.h"
#include "ops/linear.h"
#include "ops/ops.h"
#include "ops/quantize.h"
#include "ops/row_cache.h"

namespace glossa {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Relative error in the max norm: |a_i - b_i| <= tol * max(1, max_j |b_j|) for every i. (An
// element-wise relative bound is meaningless for outputs that are sums of large cancelling terms.)
void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected,
                 double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  double scale = 1.0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], tol * scale) << "at element " << i;
  }
}

double ApplyActivation(Activation a, double x) {
  switch (a) {
    case Activation::kRelu:
      return x > 0 ? x : 0;
    case Activation::kSwish:
      return x / (1 + std::exp(-x));
    case Activation::kGelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::kNone:
      break;
  }
  return x;
}

struct LinearCase {
  int64_t rows, in, out;
  Activation activation;
  bool bias;
  bool accumulate;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesNaiveReference) {
  const LinearCase c = GetParam();
  std::mt19937 rng(c.rows * 131 + c.in * 7 + c.out);
  const auto x = Random(c.rows * c.in, rng), w = Random(c.out * c.in, rng, 0.2f),
             b = Random(c.out, rng);
  auto y = Random(c.rows * c.out, rng);
  const auto y0 = y;
  Linear linear(w.data(), c.bias ? b.data() : nullptr, c.in, c.out, c.activation);
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second call reuses the cached primitive
    y = y0;
    linear.Forward(x.data(), c.rows, y.data(), c.accumulate);
    std::vector<double> expected(c.rows * c.out);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t o = 0; o < c.out; ++o) {
        double acc = c.bias ? b[o] : 0.0;
        for (int64_t i = 0; i < c.in; ++i) acc += double{x[r * c.in + i]} * w[o * c.in + i];
        acc = ApplyActivation(c.activation, acc);
        expected[r * c.out + o] = c.accumulate ? acc + y0[r * c.out + o] : acc;
      }
    }
    ExpectClose(y, expected, c.activation == Activation::kNone ? 1e-5 : 2e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Values(LinearCase{1, 1, 1, Activation::kNone, true, false},
                      LinearCase{1, 256, 256, Activation::kNone, true, false},
                      LinearCase{3, 7, 5, Activation::kNone, false, false},
                      LinearCase{17, 33, 65, Activation::kRelu, true, false},
                      LinearCase{8, 256, 1024, Activation::kSwish, true, false},
                      LinearCase{5, 64, 48, Activation::kGelu, true, false},
                      LinearCase{5, 64, 48, Activation::kGeluTanh, true, false},
                      LinearCase{32, 1024, 256, Activation::kNone, true, true},
                      LinearCase{1, 256, 15315, Activation::kNone, true, false},
                      LinearCase{130, 31, 3, Activation::kNone, true, true}));

// Several threads calling Forward on one Linear with different row counts at once (engine workers
// share a model's layers) all get the single-threaded answer.
TEST(LinearConcurrencyTest, ConcurrentCallsGiveTheSameResults) {
  std::mt19937 rng(11);
  const int64_t in = 256, out = 1024;
  const auto w = Random(out * in, rng, 0.1f), b = Random(out, rng);
  Linear linear(w.data(), b.data(), in, out, Activation::kSwish);
  const std::vector<int64_t> rows = {1, 3, 8, 17, 32, 64, 65, 100};
  std::vector<std::vector<float>> inputs, expected;
  for (int64_t r : rows) {
    inputs.push_back(Random(r * in, rng));
    expected.emplace_back(r * out);
    linear.Forward(inputs.back().data(), r, expected.back().data());
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> y;
      for (int iteration = 0; iteration < 50; ++iteration) {
        const size_t k = (t + iteration) % rows.size();
        y.assign(rows[k] * out, 0.0f);
        linear.Forward(inputs[k].data(), rows[k], y.data());
        if (y != expected[k]) mismatches++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// A matrix larger than one packing slice is copied into oneDNN's layout slice by slice; each slice
// of the plain weights is reported once, in order, and the packed copy equals one made whole (for
// every compute type: int8's packed layouts interleave four input values per output row).
class LinearPackingTest : public ::testing::TestWithParam<ComputeType> {};

TEST_P(LinearPackingTest, SlicedPackingReportsEverySliceAndEqualsWholePacking) {
  std::mt19937 rng(5);
  const ComputeType compute = GetParam();
  const int64_t in = 512;
  // Past two slices of the plain weights (4 bytes per weight in float32, 2 in bfloat16, 1 in int8).
  const int64_t bytes_per_weight = compute == ComputeType::kFloat32 ? 4
                                   : compute == ComputeType::kBFloat16 ? 2 : 1;
  const int64_t out = Linear::kPackSliceBytes / (in * bytes_per_weight) + 808;
  const auto w = Random(out * in, rng, 0.1f), b = Random(out, rng);
  std::vector<std::pair<const uint8_t*, size_t>> slices;
  std::unique_ptr<Linear> sliced, whole;
  try {
    sliced = std::make_unique<Linear>(
        LinearWeights{w.data()}, b.data(), in, out, Activation::kNone, compute,
        [&](const void* plain, size_t bytes) {
          slices.emplace_back(static_cast<const uint8_t*>(plain), bytes);
        });
    whole = std::make_unique<Linear>(LinearWeights{w.data()}, b.data(), in, out,
                                     Activation::kNone, compute);
  } catch (const dnnl::error& e) {
    GTEST_SKIP() << ComputeTypeName(compute) << " has no kernel on this CPU: " << e.what();
  }
  ASSERT_TRUE(sliced->packed());
  // Converted to another compute type, the float32 weights are reported first, slice by slice
  // as converted (ranges of w), then as a whole; the packed slices are of the converted copy.
  const auto* w_begin = reinterpret_cast<const uint8_t*>(w.data());
  const auto* w_end = w_begin + w.size() * sizeof(float);
  std::vector<std::pair<const uint8_t*, size_t>> converted, packed;
  for (const auto& slice : slices) {
    const bool in_w = slice.first >= w_begin && slice.first < w_end;
    (compute != ComputeType::kFloat32 && in_w ? converted : packed).push_back(slice);
  }
  if (compute != ComputeType::kFloat32) {
    ASSERT_GE(converted.size(), 2u);
    EXPECT_EQ(converted.back(), std::make_pair(w_begin, w.size() * sizeof(float)));
    size_t covered = 0;
    for (size_t i = 0; i + 1 < converted.size(); ++i) {
      EXPECT_EQ(converted[i].first, w_begin + covered) << "slice " << i;
      covered += converted[i].second;
    }
    EXPECT_EQ(covered, w.size() * sizeof(float));
    for (size_t i = 0; i < converted.size(); ++i) EXPECT_EQ(slices[i], converted[i]) << i;
  }
  ASSERT_EQ(packed.size(), 2u);
  EXPECT_EQ(packed[1].first, packed[0].first + packed[0].second);
  EXPECT_EQ(packed[0].second + packed[1].second, static_cast<size_t>(out * in * bytes_per_weight));
  for (int64_t rows : {1, 7, 32}) {
    const auto x = Random(rows * in, rng);
    std::vector<float> a(rows * out), c(rows * out);
    sliced->Forward(x.data(), rows, a.data());
    whole->Forward(x.data(), rows, c.data());
    EXPECT_EQ(a, c) << rows << " rows";
  }
}

INSTANTIATE_TEST_SUITE_P(ComputeTypes, LinearPackingTest,
                         ::testing::Values(ComputeType::kFloat32, ComputeType::kBFloat16,
                                           ComputeType::kInt8, ComputeType::kInt8Fast),
                         [](const auto& info) { return ComputeTypeName(info.param); });

// Calls of 1 to gemv::kMaxRows float32 rows run ops/gemv.h's kernel (in a StreamingScope, as
// decoder steps do; outside one, up to kMaxCachedRows): its results equal oneDNN's
// for the same rows bit for bit, and the same rows inside a larger call that oneDNN runs (a
// sentence's output does not depend on its batch), for the shapes and epilogues of the supported
// models.
struct SmallRowsCase {
  int64_t in, out;
  Activation activation;
  bool bias, accumulate;
};

class SmallRowsTest : public ::testing::TestWithParam<SmallRowsCase> {};

TEST_P(SmallRowsTest, EqualsOnednnAndTheSameRowsInABatch) {
  const SmallRowsCase c = GetParam();
  std::mt19937 rng(11);
  const auto w = Random(c.out * c.in, rng, 0.05f), b = Random(c.out, rng);
  Linear linear(w.data(), c.bias ? b.data() : nullptr, c.in, c.out, c.activation);
  ASSERT_TRUE(linear.packed());
  if (gemv::internal::Enabled()) {
    // The kernel must be in use where the CPU has AVX-512F: a probe that finds no matching sum
    // order would silently fall back to oneDNN.
    EXPECT_GT(gemv::MatchingChunk(c.in, c.bias, c.accumulate, c.activation), 0);
  }
  const int64_t batch = gemv::kMaxRows + 8;
  const auto x = Random(batch * c.in, rng), start = Random(batch * c.out, rng);
  std::vector<float> together = start;
  linear.Forward(x.data(), batch, together.data(), c.accumulate);
  for (int64_t rows = 1; rows <= gemv::kMaxRows; ++rows) {
    for (const bool kernel : {true, false}) {
      gemv::internal::SetEnabled(kernel);
      std::vector<float> few(start.begin(), start.begin() + rows * c.out);
      const gemv::StreamingScope streaming;  // the kernel up to kMaxRows (when enabled)
      linear.Forward(x.data(), rows, few.data(), c.accumulate);
      EXPECT_TRUE(std::equal(few.begin(), few.end(), together.begin(),
                             [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
          << rows << " rows, small-row kernel " << (kernel ? "on" : "off");
    }
  }
  gemv::internal::SetEnabled(true);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SmallRowsTest,
    ::testing::Values(SmallRowsCase{256, 256, Activation::kNone, true, false},
                      SmallRowsCase{512, 512, Activation::kNone, true, true},
                      SmallRowsCase{512, 2048, Activation::kSwish, true, false},
                      SmallRowsCase{2048, 512, Activation::kNone, true, true},
                      SmallRowsCase{1024, 4096, Activation::kRelu, true, false},
                      SmallRowsCase{4096, 1024, Activation::kNone, true, true},
                      SmallRowsCase{1024, 1000, Activation::kGelu, true, false},
                      SmallRowsCase{768, 3072, Activation::kGeluTanh, true, false},
                      SmallRowsCase{512, 8037, Activation::kNone, false, false}));

// ForwardInColumnBlocks: the same bits as Forward, every block of every piece handed out once,
// in order; on shapes of the output projections (vocabularies of 15,315 and
// 58,101 with and without bias, a row count split into pieces) and on one too narrow to block;
// float32, int8 and int8_fast. The int8 types' pieces of kInt8BlockMinRows rows or more hand out
// blocks of their own buffer (their s32 sums never fill y), fewer rows views of y.
struct ColumnBlocksCase {
  int64_t in, out;
  bool bias;
  ComputeType compute = ComputeType::kFloat32;
};

class ColumnBlocksTest : public ::testing::TestWithParam<ColumnBlocksCase> {};

TEST_P(ColumnBlocksTest, EqualsForwardAndReportsEveryBlock) {
  const ColumnBlocksCase c = GetParam();
  std::mt19937 rng(13);
  const auto w = Random(c.out * c.in, rng, 0.05f), b = Random(c.out, rng);
  std::unique_ptr<Linear> made;
  try {
    made = std::make_unique<Linear>(LinearWeights{w.data()}, c.bias ? b.data() : nullptr, c.in,
                                    c.out, Activation::kNone, c.compute);
  } catch (const dnnl::error& e) {
    GTEST_SKIP() << ComputeTypeName(c.compute) << " has no kernel on this CPU: " << e.what();
  }
  const Linear& linear = *made;
  const int64_t blocks = (c.out + Linear::kColumnBlock - 1) / Linear::kColumnBlock;
  const bool int8 = c.compute != ComputeType::kFloat32;
  // Blocks apply with one OpenMP thread (ctest's environment), where oneDNN packs s8 weights
  // in slabs of whole columns (AVX-512 VNNI).
  const char* omp_threads = std::getenv("OMP_NUM_THREADS");
  const bool expect_blocks = int8 && __builtin_cpu_supports("avx512vnni") &&
                             omp_threads != nullptr && std::string(omp_threads) == "1";
  // (rows, in a StreamingScope): the kernel's limits on each side, outside and inside a scope.
  const std::pair<int64_t, bool> calls[] = {
      {1, false},   {gemv::kMaxCachedRows, false},       {gemv::kMaxCachedRows + 1, false},
      {128, false}, {Linear::kMaxPieceRows + 44, false}, {gemv::kMaxRows, true}};
  for (const auto& [rows, streaming] : calls) {
    std::optional<gemv::StreamingScope> scope;
    if (streaming) scope.emplace();
    const auto x = Random(rows * c.in, rng);
    std::vector<float> whole(rows * c.out), blocked(rows * c.out, NAN);
    linear.Forward(x.data(), rows, whole.data());
    int64_t next_row = 0, next_col = 0, reports = 0, pieces = 0;
    linear.ForwardInColumnBlocks(x.data(), rows, blocked.data(),
                                 [&](int64_t first_row, int64_t piece_rows, int64_t first_col,
                                     int64_t cols, const float* block, int64_t stride) {
                                   ++reports;
                                   const bool in_y = block >= blocked.data() &&
                                                     block < blocked.data() + blocked.size();
                                   if (expect_blocks && c.out > Linear::kColumnBlock) {
                                     EXPECT_EQ(in_y, piece_rows < Linear::kInt8BlockMinRows)
                                         << piece_rows << " rows";
                                   }
                                   ASSERT_EQ(first_row, next_row);
                                   ASSERT_EQ(first_col, next_col);
                                   ASSERT_EQ(cols,
                                             std::min(Linear::kColumnBlock, c.out - first_col));
                                   for (int64_t r = 0; r < piece_rows; ++r) {
                                     float* to = &blocked[(first_row + r) * c.out + first_col];
                                     if (to != block + r * stride)
                                       std::memcpy(to, block + r * stride, cols * 4);
                                   }
                                   next_col = first_col + cols;
                                   if (next_col == c.out)
                                     next_col = 0, next_row = first_row + piece_rows, ++pieces;
                                 });
    EXPECT_EQ(next_row, rows);
    EXPECT_EQ(std::memcmp(blocked.data(), whole.data(), rows * c.out * 4), 0) << rows << " rows";
    EXPECT_EQ(reports, pieces * blocks);
    // Two-code int8 runs pieces of half the rows (each row is two matmul rows).
    const int64_t piece = Linear::kSmallPieceRows / (c.compute == ComputeType::kInt8 ? 2 : 1);
    EXPECT_LE(pieces, (rows + piece - 1) / piece);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ColumnBlocksTest,
                         ::testing::Values(ColumnBlocksCase{256, 15315, true},
                                           ColumnBlocksCase{512, 58101, false},
                                           ColumnBlocksCase{256, 3000, false},
                                           ColumnBlocksCase{64, 700, true},
                                           ColumnBlocksCase{256, 15315, true, ComputeType::kInt8},
                                           ColumnBlocksCase{512, 58101, false,
                                                            ComputeType::kInt8Fast},
                                           ColumnBlocksCase{256, 3000, true,
                                                            ComputeType::kInt8Fast},
                                           ColumnBlocksCase{64, 700, true, ComputeType::kInt8}));

// Packing::kDeferred: until something needs the packed copy, products of up to gemv::kMaxRows
// rows run from the plain weights slab by slab, with the bits of an ordinary (packed) Linear, and
// Float32Slab gives the packed copy's slabs exactly (padding included); a larger product packs,
// reporting every byte of the plain weights once. An input size that is no multiple of 16 and
// a partial last slab.
TEST(LinearDeferredPackingTest, GivesThePackedBitsUntilPackedThenPacks) {
  if (!gemv::internal::Enabled() || gemv::MatchingChunk(200, true, false, Activation::kNone) == 0) {
    GTEST_SKIP() << "ops/gemv.h's kernel does not serve this shape here (no AVX-512F)";
  }
  std::mt19937 rng(21);
  const int64_t in = 200, out = 1000;
  const auto w = Random(out * in, rng, 0.05f), b = Random(out, rng);
  size_t released = 0;
  const Linear packed(w.data(), b.data(), in, out);
  const Linear deferred(LinearWeights{w.data()}, b.data(), in, out, Activation::kNone,
                        ComputeType::kFloat32,
                        [&](const void*, size_t bytes) { released += bytes; },
                        Linear::Packing::kDeferred);
  ASSERT_TRUE(packed.packed());
  ASSERT_FALSE(deferred.packed());
  ASSERT_TRUE(deferred.packing_deferred());
  const int64_t stride = deferred.Float32SlabLayout().slab_stride;
  ASSERT_EQ(stride, packed.Float32SlabLayout().slab_stride);
  ASSERT_GT(stride, 0);
  std::vector<float> scratch(stride, NAN);
  for (int64_t s = 0; s < (out + gemv::kSlabCols - 1) / gemv::kSlabCols; ++s) {
    EXPECT_EQ(std::memcmp(deferred.Float32Slab(s, scratch.data()), packed.Float32Slab(s, nullptr),
                          stride * 4),
              0)
        << "slab " << s;
  }
  auto same = [](const std::vector<float>& a, const std::vector<float>& c) {
    return a.size() == c.size() && std::memcmp(a.data(), c.data(), a.size() * 4) == 0;
  };
  const gemv::StreamingScope streaming;
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{33}, gemv::kMaxRows}) {
    const auto x = Random(rows * in, rng);
    std::vector<float> a(rows * out), c(rows * out), cols(rows * 128), blocks(rows * out);
    packed.Forward(x.data(), rows, a.data());
    const size_t released_before = released;
    deferred.Forward(x.data(), rows, c.data());
    EXPECT_TRUE(same(a, c)) << rows << " rows";
    // A product over every column releases the weights' pages as it goes, all of them once.
    EXPECT_EQ(released - released_before, static_cast<size_t>(out * in * 4));
    deferred.ForwardInColumnBlocks(
        x.data(), rows, blocks.data(),
        [&](int64_t first_row, int64_t piece_rows, int64_t first_col, int64_t n, const float* block,
            int64_t block_stride) {
          for (int64_t r = 0; r < piece_rows; ++r) {
            std::memcpy(&blocks[(first_row + r) * out + first_col], block + r * block_stride, n * 4);
          }
        });
    EXPECT_TRUE(same(a, blocks)) << rows << " rows, in column blocks";
    const size_t released_before_columns = released;
    ASSERT_TRUE(deferred.ForwardColumns(x.data(), rows, 896, out - 896, cols.data()));
    EXPECT_EQ(released, released_before_columns);  // a few candidates' slabs stay mapped
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(std::memcmp(&cols[r * (out - 896)], &a[r * out + 896], (out - 896) * 4), 0);
    }
  }
  EXPECT_FALSE(deferred.packed());
  // An accumulating product is not taken from the plain weights: it packs, releasing each
  // slice as it is copied, then the whole matrix once more.
  const size_t released_before = released;
  const auto x = Random(in, rng);
  std::vector<float> a(out, 1.0f), c(out, 1.0f);
  packed.Forward(x.data(), 1, a.data(), /*accumulate=*/true);
  deferred.Forward(x.data(), 1, c.data(), /*accumulate=*/true);
  EXPECT_TRUE(same(a, c));
  EXPECT_TRUE(deferred.packed());
  EXPECT_FALSE(deferred.packing_deferred());
  EXPECT_EQ(released - released_before, static_cast<size_t>(2 * out * in * 4));
  deferred.EnsurePacked();  // once only
  EXPECT_EQ(released - released_before, static_cast<size_t>(2 * out * in * 4));
}

// With copy_plain (a model file's CopyOut, the file possibly overwritten since) a deferred Linear
// reads the caller's weights only through it once constructed: a few columns' slabs
// (ForwardColumns: the screen's candidates), every slab of a product over every column, and
// every slice it packs, each once, with the same bits as a Linear packed at once. The caller's
// weights are scribbled over after the constructor: a read in place would show.
TEST(LinearDeferredPackingTest, ReadsTheCallersWeightsOnlyThroughCopyPlain) {
  if (!gemv::internal::Enabled() || gemv::MatchingChunk(200, true, false, Activation::kNone) == 0) {
    GTEST_SKIP() << "ops/gemv.h's kernel does not serve this shape here (no AVX-512F)";
  }
  std::mt19937 rng(23);
  const int64_t in = 200, out = 1000;
  const auto original = Random(out * in, rng, 0.05f), b = Random(out, rng);
  std::vector<float> w = original;
  size_t released = 0;
  std::vector<std::pair<const void*, uint64_t>> copies;
  uint64_t copied = 0;
  const Linear packed(original.data(), b.data(), in, out);
  const Linear deferred(
      LinearWeights{w.data()}, b.data(), in, out, Activation::kNone, ComputeType::kFloat32,
      [&](const void*, size_t bytes) { released += bytes; }, Linear::Packing::kDeferred,
      [&](const void* from, uint64_t bytes, void* to) {
        copies.emplace_back(from, bytes);
        copied += bytes;
        const auto at = static_cast<const float*>(from) - w.data();
        std::memcpy(to, original.data() + at, bytes);
      });
  ASSERT_TRUE(deferred.packing_deferred());
  EXPECT_TRUE(copies.empty());
  std::fill(w.begin(), w.end(), std::nanf(""));
  const gemv::StreamingScope streaming;
  for (int64_t rows : {int64_t{1}, int64_t{5}, gemv::kMaxRows}) {
    const auto x = Random(rows * in, rng);
    std::vector<float> a(rows * out), c(rows * out), cols(rows * 168);
    packed.Forward(x.data(), rows, a.data());
    copies.clear();
    // Columns 832..999: two whole slabs and the last, partial one (40 columns).
    ASSERT_TRUE(deferred.ForwardColumns(x.data(), rows, 832, out - 832, cols.data()));
    ASSERT_EQ(copies.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(copies[i].first, w.data() + (832 + 64 * i) * in) << i;
      EXPECT_EQ(copies[i].second, static_cast<uint64_t>(i < 2 ? 64 : 40) * in * 4) << i;
    }
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(std::memcmp(&cols[r * 168], &a[r * out + 832], 168 * 4), 0) << rows << " rows";
    }
    copied = 0;
    deferred.Forward(x.data(), rows, c.data());
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << rows << " rows";
    EXPECT_EQ(copied, static_cast<uint64_t>(out * in * 4)) << rows << " rows";
  }
  EXPECT_EQ(released, 0u);  // nothing was read in place: no pages to let go of
  EXPECT_FALSE(deferred.packed());
  copied = 0;
  deferred.EnsurePacked();
  ASSERT_TRUE(deferred.packed());
  EXPECT_EQ(copied, static_cast<uint64_t>(out * in * 4));
  copies.clear();
  for (int64_t rows : {int64_t{1}, int64_t{100}}) {
    const auto x = Random(rows * in, rng);
    std::vector<float> a(rows * out), c(rows * out);
    packed.Forward(x.data(), rows, a.data());
    deferred.Forward(x.data(), rows, c.data());
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << rows << " rows, packed";
  }
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(released, 0u);
}

// A Linear packed at construction (or, tiny, never packed) with copy_plain does not read the
// caller's weights after its constructor: products of every row count (some of which may want
// the plain layout) give the bits of a Linear over weights that stay, with the caller's
// scribbled over.
TEST(LinearTest, WithCopyPlainTheCallersWeightsAreNotReadAfterTheConstructor) {
  std::mt19937 rng(29);
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{200, 1000}, {3, 2}}) {
    const auto original = Random(out * in, rng, 0.05f), b = Random(out, rng);
    std::vector<float> w = original;
    int copies = 0;
    const Linear kept(original.data(), b.data(), in, out);
    const Linear linear(LinearWeights{w.data()}, b.data(), in, out, Activation::kNone,
                        ComputeType::kFloat32, {}, Linear::Packing::kNow,
                        [&](const void*, uint64_t, void*) { ++copies; });
    std::fill(w.begin(), w.end(), std::nanf(""));
    for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}}) {
      const auto x = Random(rows * in, rng);
      std::vector<float> a(rows * out), c(rows * out);
      kept.Forward(x.data(), rows, a.data());
      linear.Forward(x.data(), rows, c.data());
      EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << in << "x" << out << ", "
                                                                  << rows << " rows";
    }
    EXPECT_EQ(std::memcmp(linear.PlainWeights(), original.data(), original.size() * 4), 0);
    EXPECT_EQ(copies, 0);  // nothing of a packed (or copied) Linear is read from the caller
  }
}

// StartPacking and EnsurePacked pack a deferred Linear (once, however many threads ask at once,
// products meanwhile giving the same bits), and the products read the packed copy from then on.
TEST(LinearDeferredPackingTest, EnsurePackedPacksOnceAcrossThreads) {
  std::mt19937 rng(22);
  const int64_t in = 256, out = 1300;  // past one column block, under one packing slice
  const auto w = Random(out * in, rng, 0.05f), b = Random(out, rng);
  std::atomic<int> whole{0};  // releases of the whole matrix: the packing's
  const Linear deferred(LinearWeights{w.data()}, b.data(), in, out, Activation::kNone,
                        ComputeType::kFloat32,
                        [&](const void*, size_t bytes) { whole += bytes == out * in * 4; },
                        Linear::Packing::kDeferred);
  if (!deferred.packing_deferred()) GTEST_SKIP() << "oneDNN keeps the plain layout here";
  const Linear packed(w.data(), b.data(), in, out);
  {
    // StartPacking returns at once; products while its thread copies give the same bits.
    const auto x = Random(2 * in, rng);
    std::vector<float> a(2 * out), c(2 * out);
    packed.Forward(x.data(), 2, a.data());
    deferred.StartPacking();
    deferred.StartPacking();  // one thread only
    for (int i = 0; i < 50; ++i) {
      deferred.Forward(x.data(), 2, c.data());
      ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << "call " << i;
    }
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { deferred.EnsurePacked(); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(deferred.packed());
  // One slice (the weights are under kPackSliceBytes), then the whole matrix once more (the
  // products meanwhile release theirs a column block at a time).
  EXPECT_EQ(whole.load(), 2);
  const auto x = Random(3 * in, rng);
  std::vector<float> a(3 * out), c(3 * out);
  packed.Forward(x.data(), 3, a.data());
  deferred.Forward(x.data(), 3, c.data());
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
}

// The row kernels run twice: with AVX-512 (where the CPU has it) and portable.
class RowKernelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    saved_ = ops::internal::Avx512Enabled();
    ops::internal::SetAvx512Enabled(GetParam());
    if (GetParam() && !ops::internal::Avx512Enabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  void TearDown() override { ops::internal::SetAvx512Enabled(saved_); }
  bool saved_ = false;
};

INSTANTIATE_TEST_SUITE_P(Kernels, RowKernelTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Avx512" : "Portable"; });

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Distance in units in the last place between two non-negative floats (0 and subnormals
// included: consecutive non-negative floats have consecutive bit patterns).
int64_t UlpDistance(float a, float b) {
  return std::abs(static_cast<int64_t>(Bits(a)) - static_cast<int64_t>(Bits(b)));
}

TEST_P(RowKernelTest, LayerNormMatchesReference) {
  std::mt19937 rng(1);
  for (int64_t dim : {1, 2, 7, 256, 1000}) {
    const int64_t rows = 5;
    auto x = Random(rows * dim, rng, 3.0f);
    const auto g = Random(dim, rng), b = Random(dim, rng);
    std::vector<double> expected(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
      mean /= dim;
      for (int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
      var /= dim;
      for (int64_t i = 0; i < dim; ++i) {
        expected[r * dim + i] = (x[r * dim + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i];
      }
    }
    ops::LayerNorm(x.data(), rows, dim, g.data(), b.data(), 1e-5f);
    ExpectClose(x, expected, 1e-5);
  }
}

// The two kernels sum in the same 64 lanes and the same pairwise order: identical bits, so a
// layer norm's result does not depend on whether the CPU has AVX-512.
TEST(OpsTest, LayerNormKernelsAgreeBitForBit) {
  if (!ops::internal::CpuHasAvx512F()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const bool saved = ops::internal::Avx512Enabled();
  std::mt19937 rng(7);
  for (int64_t dim : {1, 7, 16, 63, 64, 65, 256, 1000, 1024}) {
    const int64_t rows = 3;
    const auto x = Random(rows * dim, rng, 4.0f), g = Random(dim, rng), b = Random(dim, rng);
    auto portable = x, avx512 = x;
    for (float& v : portable) v += 10.0f;  // a mean far from 0 makes the variance's order matter
    for (float& v : avx512) v += 10.0f;
    ops::internal::SetAvx512Enabled(false);
    ops::LayerNorm(portable.data(), rows, dim, g.data(), b.data(), 1e-5f);
    ops::internal::SetAvx512Enabled(true);
    ops::LayerNorm(avx512.data(), rows, dim, g.data(), b.data(), 1e-5f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(Bits(portable[i]), Bits(avx512[i])) << "dim " << dim << " element " << i;
    }
  }
  ops::internal::SetAvx512Enabled(saved);
}

// Every 97th float in [-120, -1e-6] and [1e-6, 100] (about 4.6 million values; exp's result spans
// 0, subnormals, normals and +inf), against the correctly rounded e^x.
TEST_P(RowKernelTest, ExpIsWithinTwoUlpOfTheCorrectlyRoundedResult) {
  std::vector<float> x;
  for (float v = -120.0f; v < -1e-6f;) {
    x.push_back(v);
    const uint32_t u = Bits(v) - 97;  // toward zero
    std::memcpy(&v, &u, 4);
  }
  for (float v = 1e-6f; v < 100.0f;) {
    x.push_back(v);
    const uint32_t u = Bits(v) + 97;
    std::memcpy(&v, &u, 4);
  }
  x.insert(x.end(), {0.0f, -0.0f, 1.0f, -1.0f, 88.72283f, 88.7228394f, -87.33654f, -103.9721f,
                     -104.0f, 1e-30f, -1e-30f, 1000.0f, -1000.0f});
  std::vector<float> y(x.size());
  ops::Exp(x.data(), static_cast<int64_t>(x.size()), y.data());
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = static_cast<float>(std::exp(static_cast<double>(x[i])));
    ASSERT_EQ(std::isinf(y[i]), std::isinf(expected)) << "x = " << x[i];
    ASSERT_EQ(y[i] == 0.0f, expected == 0.0f) << "x = " << x[i];
    const int64_t d = UlpDistance(y[i], expected);
    if (d > worst) {
      worst = d;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
  std::printf("exp: %zu values, largest error %lld ulp (x = %g)\n", x.size(),
              static_cast<long long>(worst), worst_x);

  const std::vector<float> special = {-INFINITY, INFINITY, NAN};
  std::vector<float> out(3);
  ops::Exp(special.data(), 3, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], INFINITY);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST_P(RowKernelTest, SoftmaxAndLogSoftmaxMatchReference) {
  std::mt19937 rng(2);
  for (int64_t n : {1, 2, 9, 16, 17, 33, 15315}) {
    auto x = Random(n, rng, 5.0f);
    x[0] = 80.0f;  // large values must not overflow
    std::vector<double> soft(n), log_soft(n);
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max<double>(max, v);
    for (float v : x) sum += std::exp(v - max);
    for (int64_t i = 0; i < n; ++i) {
      soft[i] = std::exp(x[i] - max) / sum;
      log_soft[i] = x[i] - max - std::log(sum);
    }
    auto s = x, l = x;
    ops::Softmax(s.data(), n);
    ops::LogSoftmax(l.data(), n);
    ExpectClose(s, soft);
    ExpectClose(l, log_soft);
  }
}

TEST_P(RowKernelTest, LogSoftmaxKeepsMinusInfinity) {
  for (int64_t n : {3, 40}) {
    std::vector<float> x(n, -3.0f);
    x[0] = 1.0f;
    x[1] = -INFINITY;
    x[2] = 2.0f;
    ops::LogSoftmax(x.data(), n);
    EXPECT_TRUE(std::isinf(x[1]) && x[1] < 0);
    double total = 0;
    for (float v : x) total += std::exp(double{v});
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

// Rows the search sees: random logits, some -inf (banned ids), repeated values (ties), lengths
// around the vector width and the real vocabulary.
std::vector<std::vector<float>> TestRows() {
  std::mt19937 rng(5);
  std::vector<std::vector<float>> rows;
  for (int64_t n : {1, 2, 5, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 15315}) {
    for (int variant = 0; variant < 4; ++variant) {
      auto x = Random(n, rng, 3.0f);
      if (variant >= 1) {  // ties: a few values repeated at scattered places
        std::uniform_int_distribution<int64_t> at(0, n - 1);
        for (int j = 0; j < 8; ++j) x[at(rng)] = x[at(rng)];
      }
      if (variant >= 2 && n > 1) x[n / 2] = -INFINITY;
      if (variant == 3) {  // the largest value twice, and in the tail
        x[n - 1] = 20.0f;
        x[n / 3] = 20.0f;
      }
      rows.push_back(x);
    }
  }
  rows.push_back({-INFINITY, -INFINITY, 0.0f});
  rows.push_back(std::vector<float>(37, 1.5f));  // all equal
  return rows;
}

TEST_P(RowKernelTest, LogSumExpIsLogSoftmaxsNormaliser) {
  for (const auto& x : TestRows()) {
    const int64_t n = static_cast<int64_t>(x.size());
    const ops::LogSumExp lse = ops::ComputeLogSumExp(x.data(), n);
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max<double>(max, v);
    for (float v : x) sum += std::exp(double{v} - max);
    EXPECT_EQ(lse.max, static_cast<float>(max));
    EXPECT_NEAR(lse.log_sum, std::log(sum), 1e-6 * std::max(1.0, std::log(sum))) << "n " << n;
    auto l = x;
    ops::LogSoftmax(l.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(Bits(l[i]), Bits((x[i] - lse.max) - lse.log_sum)) << "n " << n << " at " << i;
    }
  }
}

TEST_P(RowKernelTest, ArgMaxLogSumExpTakesTheFirstLargest) {
  for (const auto& x : TestRows()) {
    const int64_t n = static_cast<int64_t>(x.size());
    const ops::ArgMaxLogSumExp r = ops::ComputeArgMaxLogSumExp(x.data(), n);
    EXPECT_EQ(r.index, ops::ArgMax(x.data(), n)) << "n " << n;
    const ops::LogSumExp lse = ops::ComputeLogSumExp(x.data(), n);
    EXPECT_EQ(Bits(r.lse.max), Bits(lse.max));
    EXPECT_EQ(Bits(r.lse.log_sum), Bits(lse.log_sum));
  }
}

// Rows assembled block by block (as the output projection does) give ComputeArgMaxLogSumExp's
// bits; blocks of -inf weigh nothing, and the normaliser stays within 1e-6 of a double sum.
TEST_P(RowKernelTest, BlockStatsAssembleTheRowsNormaliser) {
  auto rows = TestRows();
  std::mt19937 rng(9);
  std::vector<float> minus_inf_head = Random(3000, rng, 3.0f);
  std::fill(minus_inf_head.begin(), minus_inf_head.begin() + ops::kSoftmaxBlock, -INFINITY);
  rows.push_back(minus_inf_head);
  std::vector<float> max_in_last = Random(2 * ops::kSoftmaxBlock + 5, rng, 3.0f);
  max_in_last.back() = 40.0f;
  rows.push_back(max_in_last);
  std::vector<float> nan_first = Random(1500, rng, 3.0f);
  nan_first[0] = NAN;
  nan_first[1200] = 9.0f;
  rows.push_back(nan_first);
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    ops::SoftmaxAccumulator acc;
    for (int64_t i = 0; i < n; i += ops::kSoftmaxBlock) {
      acc.Add(ops::ComputeBlockStats(x.data() + i, std::min(ops::kSoftmaxBlock, n - i)));
    }
    const ops::ArgMaxLogSumExp blocked = acc.Result();
    const ops::ArgMaxLogSumExp whole = ops::ComputeArgMaxLogSumExp(x.data(), n);
    EXPECT_EQ(blocked.index, ops::ArgMax(x.data(), n)) << "n " << n;
    EXPECT_EQ(blocked.index, whole.index);
    EXPECT_EQ(Bits(blocked.lse.max), Bits(whole.lse.max));
    EXPECT_EQ(Bits(blocked.lse.log_sum), Bits(whole.lse.log_sum));
    if (std::isnan(x[0])) continue;
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max<double>(max, v);
    for (float v : x) sum += std::exp(double{v} - max);
    EXPECT_EQ(blocked.lse.max, static_cast<float>(max));
    if (std::isfinite(max)) {
      EXPECT_NEAR(blocked.lse.log_sum, std::log(sum), 1e-6 * std::max(1.0, std::log(sum)))
          << "n " << n;
    }
  }
}

// Greedy's argmax-only blocks: ComputeBlockStats's max, argmax and first-NaN flag, and a
// normaliser that is finite exactly where ComputeBlockStats's is, block by block and over the row.
TEST_P(RowKernelTest, BlockArgMaxKeepsTheArgMaxAndTheNormalisersFiniteness) {
  auto rows = TestRows();
  std::mt19937 rng(11);
  auto row = [&](int64_t n) { return Random(n, rng, 3.0f); };
  std::vector<float> nan_inside = row(3000);
  nan_inside[1500] = NAN;
  rows.push_back(nan_inside);
  std::vector<float> nan_last = row(2100);
  nan_last[2099] = NAN;
  rows.push_back(nan_last);
  std::vector<float> plus_inf = row(2500);
  plus_inf[700] = INFINITY;
  rows.push_back(plus_inf);
  std::vector<float> nan_block_then_values = row(2 * ops::kSoftmaxBlock + 9);
  std::fill(nan_block_then_values.begin(), nan_block_then_values.begin() + ops::kSoftmaxBlock, NAN);
  rows.push_back(nan_block_then_values);
  std::vector<float> minus_inf_then_nan(2 * ops::kSoftmaxBlock, -INFINITY);
  minus_inf_then_nan[ops::kSoftmaxBlock + 3] = NAN;
  rows.push_back(minus_inf_then_nan);
  rows.push_back(std::vector<float>(1500, -INFINITY));
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    ops::SoftmaxAccumulator full, argmax_only;
    for (int64_t i = 0; i < n; i += ops::kSoftmaxBlock) {
      const int64_t cols = std::min(ops::kSoftmaxBlock, n - i);
      const ops::BlockStats a = ops::ComputeBlockStats(x.data() + i, cols);
      const ops::BlockStats b = ops::ComputeBlockArgMax(x.data() + i, cols);
      EXPECT_EQ(Bits(b.max), Bits(a.max)) << "n " << n << " block at " << i;
      EXPECT_EQ(b.argmax, a.argmax) << "n " << n << " block at " << i;
      EXPECT_EQ(b.starts_nan, a.starts_nan) << "n " << n << " block at " << i;
      EXPECT_EQ(std::isnan(b.sum_exp), std::isnan(a.sum_exp)) << "n " << n << " block at " << i;
      full.Add(a);
      argmax_only.Add(b);
    }
    const ops::ArgMaxLogSumExp f = full.Result(), o = argmax_only.Result();
    EXPECT_EQ(o.index, f.index) << "n " << n;
    EXPECT_EQ(Bits(o.lse.max), Bits(f.lse.max)) << "n " << n;
    EXPECT_EQ(std::isfinite(o.lse.log_sum), std::isfinite(f.lse.log_sum)) << "n " << n;
  }
}

// UpdateTopK over a row in blocks of several sizes == the row's values (NaNs left out), stably
// sorted largest first, first k.
TEST_P(RowKernelTest, UpdateTopKInBlocksEqualsAStableSortOfTheRow) {
  auto rows = TestRows();
  std::vector<float> with_nan(50, 0.5f);
  with_nan[3] = NAN;
  with_nan[0] = NAN;
  with_nan[40] = 2.0f;
  rows.push_back(with_nan);
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<ops::ScoredId> sorted;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(x[i])) sorted.push_back({x[i], static_cast<int32_t>(i)});
    }
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.score > b.score; });
    for (int k : {1, 3, 9, 34}) {
      for (int64_t block : {int64_t{7}, int64_t{16}, ops::kSoftmaxBlock}) {
        std::vector<ops::ScoredId> best(k);
        int kept = 0;
        for (int64_t i = 0; i < n; i += block) {
          kept = ops::UpdateTopK(x.data() + i, std::min(block, n - i), static_cast<int32_t>(i), k,
                                 best.data(), kept);
        }
        ASSERT_EQ(kept, std::min<int64_t>(k, sorted.size())) << "n " << n;
        for (int j = 0; j < kept; ++j) {
          ASSERT_EQ(best[j].id, sorted[j].id) << "n " << n << " k " << k << " rank " << j;
          ASSERT_EQ(Bits(best[j].score), Bits(sorted[j].score));
        }
      }
    }
  }
}

// ArgMax (vectorised where AVX-512 is on) against the plain loop: the first of the largest, NaNs
// never chosen, index 0 for a row starting with NaN.
TEST_P(RowKernelTest, ArgMaxEqualsTheFirstLargest) {
  auto rows = TestRows();
  rows.push_back({NAN, 1.0f, 2.0f});
  rows.push_back({1.0f, NAN, 2.0f, NAN});
  std::vector<float> nan_tail(40, -1.0f);
  nan_tail[33] = NAN;
  nan_tail[20] = 4.0f;
  rows.push_back(nan_tail);
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    int64_t expected = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (x[i] > x[expected]) expected = i;
    }
    EXPECT_EQ(ops::ArgMax(x.data(), n), expected) << "n " << n;
  }
}

// TopKLogProbs == LogSoftmax, + offset, stable sort by score (descending), first k: the same ids
// in the same order, bit-identical scores.
TEST_P(RowKernelTest, TopKLogProbsEqualsLogSoftmaxThenStableSort) {
  for (const auto& x : TestRows()) {
    const int64_t n = static_cast<int64_t>(x.size());
    for (int k : {1, 2, 8, 32}) {
      for (float offset : {0.0f, -3.75f}) {
        const ops::LogSumExp lse = ops::ComputeLogSumExp(x.data(), n);
        auto l = x;
        ops::LogSoftmax(l.data(), n);
        std::vector<ops::ScoredId> expected;
        for (int64_t i = 0; i < n; ++i) {
          expected.push_back({l[i] + offset, static_cast<int32_t>(i)});
        }
        std::stable_sort(expected.begin(), expected.end(),
                         [](const auto& a, const auto& b) { return a.score > b.score; });
        expected.resize(std::min<int64_t>(k, n));
        std::vector<ops::ScoredId> best(k);
        const int kept = ops::TopKLogProbs(x.data(), n, lse, offset, k, best.data());
        ASSERT_EQ(kept, static_cast<int>(expected.size()));
        for (int j = 0; j < kept; ++j) {
          ASSERT_EQ(best[j].id, expected[j].id) << "n " << n << " k " << k << " rank " << j;
          ASSERT_EQ(Bits(best[j].score), Bits(expected[j].score));
        }
      }
    }
  }
}

TEST(OpsTest, ArgMaxTakesTheFirstOfTies) {
  const std::vector<float> x = {1, 3, 2, 3};
  EXPECT_EQ(ops::ArgMax(x.data(), 4), 1);
  const std::vector<float> one = {-INFINITY};
  EXPECT_EQ(ops::ArgMax(one.data(), 1), 0);
}

TEST(OpsTest, EmbedTokensScalesAndAddsPositions) {
  const std::vector<float> table = {1, 2, 3, 4, 5, 6};   // 3 tokens x 2
  const std::vector<float> pos = {10, 20, 30, 40};       // 2 positions x 2
  const std::vector<int> ids = {2, 0, 2}, positions = {1, 0, 0};
  const std::vector<float> expected = {40, 52, 12, 24, 20, 32};
  std::vector<float> out(6);
  ops::EmbedTokens({table.data(), {}, nullptr}, pos.data(), ids.data(), positions.data(), 3, 2,
                   2.0f, out.data());
  EXPECT_EQ(out, expected);
  // Through a copy (as a model file reads rows it leaves unmapped): the same values, and one
  // copy of one whole row per distinct token, from that row.
  std::vector<const void*> copied_from;
  const ops::StoredCopy copy = [&](const void* from, uint64_t bytes, void* to) {
    EXPECT_EQ(bytes, 2 * sizeof(float));
    copied_from.push_back(from);
    std::memcpy(to, from, bytes);
  };
  std::fill(out.begin(), out.end(), 0.0f);
  ops::EmbedTokens({table.data(), copy, nullptr}, pos.data(), ids.data(), positions.data(), 3, 2,
                   2.0f, out.data());
  EXPECT_EQ(out, expected);
  std::sort(copied_from.begin(), copied_from.end());
  EXPECT_EQ(copied_from, (std::vector<const void*>{table.data(), table.data() + 4}));
  // Through a RowCache (as the model reads them): the same values; each row is copied out on
  // its first use only, and once the cache is full, rows it lacks are copied each time.
  for (const int64_t max_rows : {3, 1}) {
    copied_from.clear();
    const ops::StoredTable cached{table.data(), copy,
                                  std::make_shared<ops::RowCache>(table.data(), 3, 2, copy,
                                                                  max_rows)};
    for (int call = 0; call < 2; ++call) {
      std::fill(out.begin(), out.end(), 0.0f);
      ops::EmbedTokens(cached, pos.data(), ids.data(), positions.data(), 3, 2, 2.0f, out.data());
      EXPECT_EQ(out, expected) << "max_rows " << max_rows << ", call " << call;
    }
    EXPECT_EQ(cached.cache->rows_kept(), max_rows == 3 ? 2 : 1);
    // max_rows 3: token 2, then 0, once each. 1: token 2 is kept, 0 never is: copied out on
    // each call.
    const std::vector<const void*> expected_copies =
        max_rows == 3 ? std::vector<const void*>{table.data() + 4, table.data()}
                      : std::vector<const void*>{table.data() + 4, table.data(), table.data()};
    EXPECT_EQ(copied_from, expected_copies) << "max_rows " << max_rows;
  }
}

TEST(RowCacheTest, ThreadsShareEachRowCopiedOnce) {
  constexpr int64_t kRows = 64, kDim = 8;
  std::vector<float> table(kRows * kDim);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  std::atomic<int> copies{0};
  ops::RowCache cache(table.data(), kRows, kDim,
                      [&](const void* from, uint64_t bytes, void* to) {
                        copies.fetch_add(1);
                        std::memcpy(to, from, bytes);
                      },
                      48);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0}, missing{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (int64_t i = 0; i < kRows; ++i) {
          const int64_t id = (i * 7 + t + round) % kRows;
          const float* row = cache.Find(id);
          if (row == nullptr) {
            missing.fetch_add(1);
            continue;
          }
          for (int64_t c = 0; c < kDim; ++c) {
            if (row[c] != table[id * kDim + c]) wrong.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache.rows_kept(), 48);
  EXPECT_EQ(copies.load(), 48);  // each kept row copied once, whatever the threads' order
  EXPECT_GT(missing.load(), 0);  // the 16 rows past the budget are never kept
  int found = 0;
  for (int64_t id = 0; id < kRows; ++id) {
    const float* row = cache.Find(id);
    if (row == nullptr) continue;
    ++found;
    EXPECT_EQ(cache.Find(id), row);
    EXPECT_EQ(row[0], table[id * kDim]);
  }
  EXPECT_EQ(found, 48);
  EXPECT_EQ(copies.load(), 48);  // nothing copied again
}

TEST(AttentionTest, MatchesNaiveReference) {
  std::mt19937 rng(3);
  for (auto [heads, head_dim, keys] : {std::tuple{1, 1, 1}, {4, 64, 37}, {2, 3, 5}, {8, 16, 200}}) {
    const int d = heads * head_dim;
    const auto q = Random(d, rng), k = Random(keys * d, rng), v = Random(keys * d, rng);
    std::vector<float> out(d), scores(heads * keys);
    AttendRow(
        q.data(), heads, head_dim, keys, [&](int t) { return k.data() + t * d; },
        [&](int t) { return v.data() + t * d; }, scores.data(), out.data());
    std::vector<double> expected(d, 0.0);
    for (int h = 0; h < heads; ++h) {
      std::vector<double> s(keys);
      double max = -INFINITY, sum = 0;
      for (int t = 0; t < keys; ++t) {
        s[t] = 0;
        for (int i = 0; i < head_dim; ++i) s[t] += double{q[h * head_dim + i]} * k[t * d + h * head_dim + i];
        max = std::max(max, s[t]);
      }
      for (double& e : s) sum += (e = std::exp(e - max));
      for (int t = 0; t < keys; ++t) {
        for (int i = 0; i < head_dim; ++i) expected[h * head_dim + i] += s[t] / sum * v[t * d + h * head_dim + i];
      }
    }
    ExpectClose(out, expected, 1e-5);
  }
}

// Heads of 64 run 4 heads per pass (AVX-512); each head must still get exactly the bits of the
// one-head-at-a-time kernels (DotRows, Softmax, AddWeightedRows over chunks of kChunkRows keys).
TEST(AttentionTest, HeadsOf64AsOneHeadAtATime) {
  using namespace attention_internal;
  std::mt19937 rng(5);
  for (int heads : {1, 2, 3, 4, 5, 8, 9, 16}) {
    for (int keys : {1, 37, 64, 130}) {
      const int d = heads * 64;
      const auto q = Random(d, rng), k = Random(keys * d, rng), v = Random(keys * d, rng);
      std::vector<float> out(d), scores(heads * keys);
      AttendRow(
          q.data(), heads, 64, keys, [&](int t) { return k.data() + t * d; },
          [&](int t) { return v.data() + t * d; }, scores.data(), out.data());
      std::vector<float> expected(d, 0.0f), s(keys);
      const float* rows[kChunkRows];
      for (int h = 0; h < heads; ++h) {
        for (int t0 = 0; t0 < keys; t0 += kChunkRows) {
          const int n = std::min(kChunkRows, keys - t0);
          for (int j = 0; j < n; ++j) rows[j] = k.data() + (t0 + j) * d + h * 64;
          DotRows(q.data() + h * 64, rows, n, 64, s.data() + t0);
        }
        ops::Softmax(s.data(), keys);
        for (int t0 = 0; t0 < keys; t0 += kChunkRows) {
          const int n = std::min(kChunkRows, keys - t0);
          for (int j = 0; j < n; ++j) rows[j] = v.data() + (t0 + j) * d + h * 64;
          AddWeightedRows(s.data() + t0, rows, n, 64, expected.data() + h * 64);
        }
      }
      for (int i = 0; i < d; ++i) {
        ASSERT_EQ(Bits(out[i]), Bits(expected[i]))
            << "heads " << heads << " keys " << keys << " i " << i;
      }
    }
  }
}

// Keys and values in half precision (the int8_fast decoder's cross-attention) give exactly the
// result of float rows holding the widened values: on AVX-512 with heads of 64 (the kernels
// widen as they load) and on every other path (the rows are widened first).
TEST(AttentionTest, HalfRowsAsTheirWidenedFloats) {
  std::mt19937 rng(9);
  for (auto [heads, head_dim, keys] :
       {std::tuple{4, 64, 30}, {1, 64, 1}, {16, 64, 130}, {3, 64, 7}, {2, 3, 5}, {8, 16, 70}}) {
    const int d = heads * head_dim;
    const auto q = Random(d, rng), k = Random(keys * d, rng), v = Random(keys * d, rng);
    std::vector<uint16_t> k16(k.size()), v16(v.size());
    std::vector<float> k_wide(k.size()), v_wide(v.size());
    for (size_t i = 0; i < k.size(); ++i) {
      // Any bits will do where FloatToHalf is unavailable: the widened floats are the reference.
      if (!quant::FloatToHalf(&k[i], 1, &k16[i]))
        k16[i] = static_cast<uint16_t>(0x3000 + i % 0x800);
      if (!quant::FloatToHalf(&v[i], 1, &v16[i]))
        v16[i] = static_cast<uint16_t>(0xB000 + i % 0x800);
      k_wide[i] = quant::HalfToFloat(k16[i]);
      v_wide[i] = quant::HalfToFloat(v16[i]);
    }
    std::vector<float> out(d), expected(d), scores(heads * keys);
    AttendRow(
        q.data(), heads, head_dim, keys, [&](int t) { return k16.data() + t * d; },
        [&](int t) { return v16.data() + t * d; }, scores.data(), out.data());
    AttendRow(
        q.data(), heads, head_dim, keys, [&](int t) { return k_wide.data() + t * d; },
        [&](int t) { return v_wide.data() + t * d; }, scores.data(), expected.data());
    for (int i = 0; i < d; ++i) {
      ASSERT_EQ(Bits(out[i]), Bits(expected[i]))
          << "heads " << heads << " head_dim " << head_dim << " keys " << keys << " i " << i;
    }
  }
}

// A whole sentence's self-attention (the encoder's) equals AttendRow for each query: to within
// rounding with heads of 64 on AVX-512 (its sums run in another order), bit for bit elsewhere.
// Lengths around the 16-key blocks and the 64 keys its softmax keeps in registers; rows apart by
// more than their width, to catch a stride taken for the width.
TEST(AttentionTest, SentenceAsEachRowAlone) {
  std::mt19937 rng(11);
  std::vector<float> scratch;
  for (auto [heads, head_dim] : {std::pair{4, 64}, {1, 64}, {3, 64}, {16, 64}, {2, 24}}) {
    for (int len : {1, 3, 15, 16, 17, 30, 64, 65, 130}) {
      const int d = heads * head_dim, stride = d + 16;
      const auto q = Random(len * stride, rng, 0.3f), k = Random(len * stride, rng),
                 v = Random(len * stride, rng);
      std::vector<float> out(len * stride, -7.0f), expected(len * stride, -7.0f),
          scores(heads * len);
      AttendSentence(q.data(), k.data(), v.data(), len, heads, head_dim, stride, scratch,
                     out.data());
      for (int t = 0; t < len; ++t) {
        AttendRow(
            q.data() + t * stride, heads, head_dim, len,
            [&](int j) { return k.data() + j * stride; },
            [&](int j) { return v.data() + j * stride; }, scores.data(),
            expected.data() + t * stride);
      }
      const bool exact = !attention_internal::HeadsOf64(head_dim);
      for (int i = 0; i < len * stride; ++i) {
        const std::string where = "heads " + std::to_string(heads) + " head_dim " +
                                  std::to_string(head_dim) + " len " + std::to_string(len) +
                                  " i " + std::to_string(i);
        if (exact || i % stride >= d) {  // the gap between rows is never written
          ASSERT_EQ(Bits(out[i]), Bits(expected[i])) << where;
        } else {
          ASSERT_NEAR(out[i], expected[i], 1e-5f * (1.0f + std::abs(expected[i]))) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace glossa
