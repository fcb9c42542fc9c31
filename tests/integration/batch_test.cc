// A sentence's translation does not depend on what it is batched with.
#include <cstdio>

#include "common/test_util.h"
#include "engine/translator.h"

namespace glossa {
namespace {

void CheckAloneEqualsBatched(int beam_size) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<int>> sources;
  for (const auto& g : testing::ReadGolden("greedy")) sources.push_back(g.src_ids);
  TranslatorOptions batched_options;
  batched_options.max_batch_size = 32;
  Translator batched(model, batched_options);
  TranslateOptions opts;
  opts.beam_size = beam_size;
  opts.max_output_tokens = 256;
  auto together = batched.TranslateIds(sources, opts);
  ASSERT_TRUE(together.ok()) << together.status();
  TranslatorOptions alone_options;
  alone_options.max_batch_size = 1;
  Translator alone(model, alone_options);
  int same = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto one = alone.TranslateIds({sources[i]}, opts);
    ASSERT_TRUE(one.ok()) << one.status();
    if ((*one)[0][0].tokens == (*together)[i][0].tokens) {
      ++same;
    } else {
      std::printf("beam %d: line %zu differs alone and in a batch of 32\n", beam_size, i);
    }
  }
  std::printf("beam %d: %d of %zu sentences identical alone and in batches of 32\n", beam_size,
              same, sources.size());
  // fp32 kernels may order sums differently for other batch shapes: allow rare float ties.
  EXPECT_GE(same, static_cast<int>(sources.size()) - 2);
}

TEST(BatchTest, GreedyAloneEqualsBatched) {
  GLOSSA_REQUIRE_SHARED();
  CheckAloneEqualsBatched(1);
}

TEST(BatchTest, BeamAloneEqualsBatched) {
  GLOSSA_REQUIRE_SHARED();
  CheckAloneEqualsBatched(4);
}

}  // namespace
}  // namespace glossa
