// Parity with Hugging Face's generate() on ../shared/golden (transformers 4.47.1, fp32, batch 1):
// token ids of greedy and beam-4 outputs, beam scores, and the n-best scores.
#include <cmath>
#include <cstdio>

#include "common/test_util.h"
#include "engine/translator.h"
#include "ops/argmax_screen.h"
#include "ops/ops.h"

namespace glossa {
namespace {

// Log-probabilities of each step's tokens when the decoder is fed `tokens` (teacher forcing).
std::vector<std::vector<float>> StepLogProbs(const Model& model, const std::vector<int>& source,
                                             const std::vector<int>& tokens) {
  std::vector<int> prefix = {model.config().decoder_start_id};
  prefix.insert(prefix.end(), tokens.begin(), tokens.end());
  prefix.pop_back();
  auto logits = testing::TeacherForcedLogits(model, source, prefix);
  for (auto& row : logits) ops::LogSoftmax(row.data(), row.size());
  return logits;
}

struct ParityReport {
  int identical = 0;
  int total = 0;
};

// Compares our best hypotheses with the golden ones; prints each mismatch with the margin
// between our token and the golden token at the first differing step (teacher-forced on the
// shared prefix): a tiny margin means a floating-point near-tie, a large one a real bug.
ParityReport Compare(const Model& model, const std::vector<testing::GoldenLine>& golden,
                     const std::vector<std::vector<Hypothesis>>& ours, const char* mode) {
  ParityReport report;
  for (size_t i = 0; i < golden.size(); ++i) {
    ++report.total;
    const auto& mine = ours[i][0].tokens;
    const auto& gold = golden[i].out_ids;
    if (mine == gold) {
      ++report.identical;
      continue;
    }
    size_t k = 0;
    while (k < mine.size() && k < gold.size() && mine[k] == gold[k]) ++k;
    std::vector<int> shared(gold.begin(), gold.begin() + std::min(k + 1, gold.size()));
    const auto lp = StepLogProbs(model, golden[i].src_ids, shared);
    const float margin = k < mine.size() && k < gold.size() ? lp[k][mine[k]] - lp[k][gold[k]] : NAN;
    std::printf("%s mismatch line %zu at step %zu: ours %d, golden %d, log-prob margin %.6f\n",
                mode, i, k, k < mine.size() ? mine[k] : -1, k < gold.size() ? gold[k] : -1, margin);
  }
  std::printf("%s: %d of %d lines identical to Hugging Face\n", mode, report.identical,
              report.total);
  return report;
}

std::vector<std::vector<int>> Sources(const std::vector<testing::GoldenLine>& golden) {
  std::vector<std::vector<int>> s;
  for (const auto& g : golden) s.push_back(g.src_ids);
  return s;
}

TEST(ParityTest, GreedyMatchesHuggingFace) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  const auto golden = testing::ReadGolden("greedy");
  Translator translator(model);
  TranslateOptions opts;
  opts.beam_size = 1;
  opts.max_output_tokens = 256;
  auto ours = translator.TranslateIds(Sources(golden), opts);
  ASSERT_TRUE(ours.ok()) << ours.status();
  const ParityReport r = Compare(*model, golden, *ours, "greedy");
  EXPECT_GE(r.identical, std::ceil(0.995 * r.total));

  // Hugging Face's greedy "score" sums the processed logits (raw logits, the forced EOS = 0) of
  // the chosen tokens: checking it checks our raw logits, bias included, against PyTorch's.
  int checked = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    if ((*ours)[i][0].tokens != golden[i].out_ids) continue;
    std::vector<int> prefix = {model->config().decoder_start_id};
    prefix.insert(prefix.end(), golden[i].out_ids.begin(), golden[i].out_ids.end() - 1);
    const auto logits = testing::TeacherForcedLogits(*model, golden[i].src_ids, prefix);
    double sum = 0;
    for (size_t t = 0; t < golden[i].out_ids.size(); ++t) {
      if (t == 255) continue;  // the forced EOS scores 0
      sum += logits[t][golden[i].out_ids[t]];
    }
    EXPECT_NEAR(sum, golden[i].score, 1e-3 * std::max(1.0, std::abs(golden[i].score)))
        << "line " << i;
    ++checked;
  }
  EXPECT_EQ(checked, r.identical);
}

// Greedy without scores, at most ArgMaxScreen::kMaxRows sentences together: the steps take their
// tokens from the output projection's screen (ops/argmax_screen.h) instead of the logits, and
// every line must equal greedy with scores, token for token.
TEST(ParityTest, GreedyWithoutScoresTakesTheSameTokens) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  if (model->weights().lm_head_screen == nullptr ||
      model->weights().lm_head_screen->Get() == nullptr) {
    GTEST_SKIP() << "no ArgMaxScreen for the demo model on this CPU (it needs AVX-512F and "
                    "AVX-512 VNNI)";
  }
  const auto golden = testing::ReadGolden("greedy");
  TranslatorOptions narrow;
  narrow.max_batch_size = ArgMaxScreen::kMaxRows;
  Translator translator(model, narrow);
  TranslateOptions opts;
  opts.beam_size = 1;
  opts.max_output_tokens = 256;
  auto scored = translator.TranslateIds(Sources(golden), opts);
  ASSERT_TRUE(scored.ok()) << scored.status();
  const ArgMaxScreen::Counts before = ArgMaxScreen::ProcessCounts();
  opts.scores = false;
  auto unscored = translator.TranslateIds(Sources(golden), opts);
  ASSERT_TRUE(unscored.ok()) << unscored.status();
  const ArgMaxScreen::Counts after = ArgMaxScreen::ProcessCounts();
  int64_t tokens = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    EXPECT_EQ((*unscored)[i][0].tokens, (*scored)[i][0].tokens) << "line " << i;
    EXPECT_EQ((*unscored)[i][0].score, 0.0f) << "line " << i;
    tokens += static_cast<int64_t>((*unscored)[i][0].tokens.size());
  }
  // Every step was screened (the forced EOS ones too), but for a rare undecided one.
  const int64_t rows = after.rows - before.rows;
  std::printf(
      "screened %lld of %lld tokens; %.2f candidates per screened token\n",
      static_cast<long long>(rows), static_cast<long long>(tokens),
      static_cast<double>(after.candidates - before.candidates) / std::max<int64_t>(rows, 1));
  EXPECT_GT(rows, tokens * 9 / 10);
  const ParityReport r = Compare(*model, golden, *unscored, "greedy without scores");
  EXPECT_GE(r.identical, std::ceil(0.995 * r.total));
}

// Greedy without scores from the logits (float32 without the screen, and int8_fast, which has
// none): each step takes the argmax without the normaliser (ops::ComputeBlockArgMax), and every
// line must equal greedy with scores, token for token; float32's must match Hugging Face's.
TEST(ParityTest, GreedyWithoutScoresFromTheLogitsTakesTheSameTokens) {
  GLOSSA_REQUIRE_SHARED();
  auto golden = testing::ReadGolden("greedy");
  golden.resize(std::min<size_t>(golden.size(), 200));  // the suite's time: 200 lines do
  for (const char* type : {"float32", "int8_fast"}) {
    ModelOptions options;
    options.compute_type = type;
    options.argmax_screen = false;
    auto model = Model::Load(testing::DemoModelPath(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    Translator translator(*model);
    TranslateOptions opts;
    opts.beam_size = 1;
    opts.max_output_tokens = 256;
    auto scored = translator.TranslateIds(Sources(golden), opts);
    ASSERT_TRUE(scored.ok()) << scored.status();
    opts.scores = false;
    auto unscored = translator.TranslateIds(Sources(golden), opts);
    ASSERT_TRUE(unscored.ok()) << unscored.status();
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ((*unscored)[i][0].tokens, (*scored)[i][0].tokens) << type << " line " << i;
    }
    if (std::string(type) != "float32") continue;
    const ParityReport r = Compare(**model, golden, *unscored, "greedy without scores, no screen");
    EXPECT_GE(r.identical, std::ceil(0.995 * r.total));
  }
}

TEST(ParityTest, Beam4MatchesHuggingFace) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  const auto golden = testing::ReadGolden("beam4");
  Translator translator(model);
  TranslateOptions opts;
  opts.beam_size = 4;
  opts.max_output_tokens = 256;
  opts.num_hypotheses = 4;
  auto ours = translator.TranslateIds(Sources(golden), opts);
  ASSERT_TRUE(ours.ok()) << ours.status();
  const ParityReport r = Compare(*model, golden, *ours, "beam4");
  EXPECT_GE(r.identical, std::ceil(0.995 * r.total));

  double worst = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    const auto& nbest = (*ours)[i];
    ASSERT_EQ(nbest.size(), 4u) << "line " << i;
    if (nbest[0].tokens == golden[i].out_ids) {
      worst = std::max(worst, std::abs(nbest[0].score - golden[i].score));
      EXPECT_NEAR(nbest[0].score, golden[i].score, 1e-3) << "line " << i;
    }
    // Every n-best score equals its hypothesis' log-probability / length (length_penalty 1),
    // recomputed by teacher forcing (on the first 100 lines: it costs a decoder pass each).
    for (size_t n = 0; i < 100 && n < nbest.size(); ++n) {
      if (n > 0) {
        EXPECT_GE(nbest[n - 1].score, nbest[n].score);
      }
      const auto& tokens = nbest[n].tokens;
      const auto lp = StepLogProbs(*model, golden[i].src_ids, tokens);
      double sum = 0;
      for (size_t t = 0; t < tokens.size(); ++t) sum += t == 255 ? 0.0 : lp[t][tokens[t]];
      EXPECT_NEAR(nbest[n].score, sum / tokens.size(), 1e-3) << "line " << i << " n-best " << n;
    }
  }
  std::printf("beam4: largest difference from Hugging Face's sequence score %.3g\n", worst);
}

}  // namespace
}  // namespace glossa
