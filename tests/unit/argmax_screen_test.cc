// ArgMaxScreen against the argmax of Linear::Forward's own logits: the same id and the same bits,
// for random rows, exact ties, near ties one ulp apart, excluded ids and a large vocabulary.
#include "ops/argmax_screen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "ops/gemv.h"
#include "ops/ops.h"

namespace glossa {
namespace {

struct Layer {
  int64_t in, out;
  std::vector<float> weight, bias;  // [out, in], [out]
};

Layer RandomLayer(int64_t in, int64_t out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Layer l{in, out, std::vector<float>(in * out), std::vector<float>(out)};
  for (float& w : l.weight) w = normal(rng);
  for (float& b : l.bias) b = normal(rng);
  return l;
}

// Forward's argmax over the ids not excluded, lowest id among equals, and its value; y holds
// the row's logits.
std::pair<int64_t, float> Reference(std::vector<float> y, const std::vector<int>& excluded) {
  for (int id : excluded) y[id] = -std::numeric_limits<float>::infinity();
  const int64_t best = static_cast<int64_t>(ops::ArgMax(y.data(), static_cast<int64_t>(y.size())));
  return {best, y[best]};
}

std::pair<int64_t, float> Reference(const Linear& linear, const float* x,
                                    const std::vector<int>& excluded) {
  std::vector<float> y(linear.out());
  linear.Forward(x, 1, y.data());
  return Reference(std::move(y), excluded);
}

class ArgMaxScreenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::internal::CpuHasAvx512F() || !__builtin_cpu_supports("avx512vnni")) {
      GTEST_SKIP() << "the screen needs AVX-512F and AVX-512 VNNI";
    }
  }
};

// Rows of 1 to kMaxRows, each compared with Forward over all the rows at once, as a decoder step
// computes them (in a gemv::StreamingScope: ops/gemv.h's kernel up to 64 rows), and with
// Forward of that row alone (ids 5000 + 37: a partial slab).
TEST_F(ArgMaxScreenTest, MatchesForwardOnRandomRows) {
  const Layer l = RandomLayer(512, 5037, 1);
  const Linear linear(l.weight.data(), l.bias.data(), l.in, l.out);
  const auto screen = ArgMaxScreen::Build(linear);
  ASSERT_NE(screen, nullptr);
  EXPECT_GE(screen->bytes(), l.in * l.out);
  const gemv::StreamingScope streaming;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const ArgMaxScreen::Counts before = ArgMaxScreen::ProcessCounts();
  int64_t rows_seen = 0;
  const int64_t row_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 32, 33, ArgMaxScreen::kMaxRows};
  for (int trial = 0; trial < 36; ++trial) {
    const int64_t rows = row_counts[trial % std::size(row_counts)];
    std::vector<float> x(rows * l.in);
    for (float& v : x) v = normal(rng) * (trial % 3 == 0 ? 30.0f : 1.0f);
    if (trial % 4 == 1) x[trial % l.in] *= 8.0f;  // one outlying input: a coarser code step
    std::vector<int> excluded = {static_cast<int>(trial * 97 % l.out), 0};
    std::vector<int> offsets = {0};
    std::vector<int> all;
    for (int64_t r = 0; r < rows; ++r) {
      all.insert(all.end(), excluded.begin(), excluded.end());
      offsets.push_back(static_cast<int>(all.size()));
    }
    int64_t index[ArgMaxScreen::kMaxRows];
    float value[ArgMaxScreen::kMaxRows];
    ASSERT_TRUE(screen->ArgMax(x.data(), rows, all.data(), offsets.data(), index, value));
    std::vector<float> y(rows * l.out);
    linear.Forward(x.data(), rows, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      const auto [id, v] =
          Reference(std::vector<float>(y.begin() + r * l.out, y.begin() + (r + 1) * l.out),
                    excluded);
      EXPECT_EQ(index[r], id) << "trial " << trial << " row " << r << " of " << rows;
      EXPECT_EQ(std::memcmp(&value[r], &v, sizeof v), 0) << "trial " << trial << " row " << r;
      const auto [alone_id, alone_v] = Reference(linear, x.data() + r * l.in, excluded);
      EXPECT_EQ(alone_id, id);
      EXPECT_EQ(std::memcmp(&alone_v, &v, sizeof v), 0);
    }
    rows_seen += rows;
  }
  const ArgMaxScreen::Counts after = ArgMaxScreen::ProcessCounts();
  EXPECT_EQ(after.rows - before.rows, rows_seen);
  const double per_row = static_cast<double>(after.candidates - before.candidates) / rows_seen;
  std::printf("candidates per row: %.2f of %lld ids\n", per_row, static_cast<long long>(l.out));
  EXPECT_LT(per_row, 100.0);  // a screen that lets most ids through would save nothing
}

// A Linear whose packing is deferred (the model's output projection with a screen): the screen
// is built from its plain weights, whose every byte it then releases, answers as the screen of
// a packed Linear does, bit for bit, and leaves it unpacked.
TEST_F(ArgMaxScreenTest, ADeferredLinearStaysUnpackedWithTheSameAnswers) {
  const Layer l = RandomLayer(256, 3037, 5);
  const Linear packed(l.weight.data(), l.bias.data(), l.in, l.out);
  size_t released = 0;
  const Linear deferred(LinearWeights{l.weight.data()}, l.bias.data(), l.in, l.out,
                        Activation::kNone, ComputeType::kFloat32,
                        [&](const void*, size_t bytes) { released += bytes; },
                        Linear::Packing::kDeferred);
  const auto a = ArgMaxScreen::Build(packed), b = ArgMaxScreen::Build(deferred);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(released, static_cast<size_t>(l.in * l.out * 4));
  const gemv::StreamingScope streaming;
  std::mt19937 rng(6);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t rows : {int64_t{1}, int64_t{5}, ArgMaxScreen::kMaxRows}) {
    std::vector<float> x(rows * l.in);
    for (float& v : x) v = normal(rng);
    std::vector<int> offsets(rows + 1, 0);
    int64_t index_a[ArgMaxScreen::kMaxRows], index_b[ArgMaxScreen::kMaxRows];
    float value_a[ArgMaxScreen::kMaxRows], value_b[ArgMaxScreen::kMaxRows];
    ASSERT_TRUE(a->ArgMax(x.data(), rows, nullptr, offsets.data(), index_a, value_a));
    ASSERT_TRUE(b->ArgMax(x.data(), rows, nullptr, offsets.data(), index_b, value_b));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(index_a[r], index_b[r]) << rows << " rows, row " << r;
      EXPECT_EQ(std::memcmp(&value_a[r], &value_b[r], sizeof(float)), 0);
    }
  }
  EXPECT_FALSE(deferred.packed());
}

// Columns that tie exactly (copies) or differ in their last bit: the lowest id of the largest
// value, as Forward's argmax, however close the runner-up.
TEST_F(ArgMaxScreenTest, SettlesTiesAndNearTies) {
  Layer l = RandomLayer(256, 700, 3);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(l.in);
  for (float& v : x) v = normal(rng);
  // Make column 600 the clear winner, then put copies of it and one-ulp neighbours around.
  for (int64_t i = 0; i < l.in; ++i) l.weight[600 * l.in + i] = 0.2f * x[i];
  l.bias[600] = 0.0f;
  for (int64_t j : {100, 650, 699}) {
    std::copy_n(&l.weight[600 * l.in], l.in, &l.weight[j * l.in]);
    l.bias[j] = 0.0f;
  }
  l.weight[101 * l.in] = l.weight[600 * l.in];  // 101: a copy of 600 but for one weight nudged
  for (int64_t i = 1; i < l.in; ++i) l.weight[101 * l.in + i] = l.weight[600 * l.in + i];
  l.weight[101 * l.in + 7] = std::nextafter(l.weight[600 * l.in + 7], 1.0f);
  l.bias[101] = 0.0f;
  const Linear linear(l.weight.data(), l.bias.data(), l.in, l.out);
  const auto screen = ArgMaxScreen::Build(linear);
  ASSERT_NE(screen, nullptr);
  for (const std::vector<int>& excluded :
       {std::vector<int>{}, std::vector<int>{100}, std::vector<int>{100, 101},
        std::vector<int>{100, 101, 600}, std::vector<int>{100, 101, 600, 650}}) {
    const int offsets[2] = {0, static_cast<int>(excluded.size())};
    int64_t index;
    float value;
    ASSERT_TRUE(screen->ArgMax(x.data(), 1, excluded.data(), offsets, &index, &value));
    const auto [id, v] = Reference(linear, x.data(), excluded);
    EXPECT_EQ(index, id) << excluded.size() << " excluded";
    EXPECT_EQ(value, v);
  }
}

// Weights the int8 codes hold exactly (multiples of 2^-7), so only the input's codes err: with
// x = (127, 2.5001, 2.5001, 5.1) the codes are (127, 3, 3, 5). Column 4 differs from column 3
// by (0, 1, 1, -1): its exact logit is lower by 0.0998 * 2^-7, its coded one higher by 2^-7.
// A screen that left the input codes' error out of its bound would pick column 4.
TEST_F(ArgMaxScreenTest, TheInputCodesErrorIsBounded) {
  const int64_t in = 8, out = 70;
  Layer l{in, out, std::vector<float>(in * out, 0.0f), std::vector<float>(out, 0.0f)};
  const float step = std::ldexp(1.0f, -7);
  const int a[in] = {127, 10, -20, 30, 0, 0, 0, 0};
  for (int64_t i = 0; i < in; ++i) {
    l.weight[3 * in + i] = a[i] * step;
    l.weight[4 * in + i] = a[i] * step;
  }
  l.weight[4 * in + 1] += step;
  l.weight[4 * in + 2] += step;
  l.weight[4 * in + 3] -= step;
  const Linear linear(l.weight.data(), l.bias.data(), l.in, l.out);
  const auto screen = ArgMaxScreen::Build(linear);
  ASSERT_NE(screen, nullptr);
  const std::vector<float> x = {127.0f, 2.5001f, 2.5001f, 5.1f, 0.0f, 0.0f, 0.0f, 0.0f};
  const auto [id, v] = Reference(linear, x.data(), {});
  ASSERT_EQ(id, 3);
  const int none[2] = {0, 0};
  int64_t index;
  float value;
  ASSERT_TRUE(screen->ArgMax(x.data(), 1, nullptr, none, &index, &value));
  EXPECT_EQ(index, 3);
  EXPECT_EQ(value, v);
}

TEST_F(ArgMaxScreenTest, SaysUndecidedRatherThanGuess) {
  const Layer l = RandomLayer(128, 200, 5);
  const Linear linear(l.weight.data(), l.bias.data(), l.in, l.out);
  const auto screen = ArgMaxScreen::Build(linear);
  ASSERT_NE(screen, nullptr);
  std::vector<float> x(l.in, 0.5f);
  int64_t index;
  float value;
  const int none[2] = {0, 0};
  ASSERT_TRUE(screen->ArgMax(x.data(), 1, nullptr, none, &index, &value));
  x[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(screen->ArgMax(x.data(), 1, nullptr, none, &index, &value));
  x[3] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(screen->ArgMax(x.data(), 1, nullptr, none, &index, &value));
  x[3] = 0.5f;
  std::vector<int> every(l.out);
  for (int j = 0; j < l.out; ++j) every[j] = j;
  const int all[2] = {0, static_cast<int>(l.out)};
  EXPECT_FALSE(screen->ArgMax(x.data(), 1, every.data(), all, &index, &value));
  EXPECT_FALSE(screen->ArgMax(x.data(), ArgMaxScreen::kMaxRows + 1, nullptr, none, &index, &value));

  // A finite input whose products overflow: |x|_1 is finite, a logit is not.
  Layer large = l;
  std::fill_n(large.weight.begin() + 7 * l.in, l.in, 100.0f);
  const Linear overflowing(large.weight.data(), large.bias.data(), l.in, l.out);
  const auto screen2 = ArgMaxScreen::Build(overflowing);
  ASSERT_NE(screen2, nullptr);
  std::vector<float> huge(l.in, 2e36f);
  EXPECT_FALSE(screen2->ArgMax(huge.data(), 1, nullptr, none, &index, &value));
}

// Only float32 Linears without an activation get a screen.
TEST_F(ArgMaxScreenTest, BuiltOnlyForFloat32WithoutActivation) {
  const Layer l = RandomLayer(128, 300, 6);
  const Linear relu(l.weight.data(), l.bias.data(), l.in, l.out, Activation::kRelu);
  EXPECT_EQ(ArgMaxScreen::Build(relu), nullptr);
  try {
    const Linear int8(LinearWeights{l.weight.data()}, l.bias.data(), l.in, l.out, Activation::kNone,
                      ComputeType::kInt8);
    EXPECT_EQ(ArgMaxScreen::Build(int8), nullptr);
  } catch (const dnnl::error&) {
    // No int8 kernel on this CPU: nothing to check.
  }
}

}  // namespace
}  // namespace glossa
