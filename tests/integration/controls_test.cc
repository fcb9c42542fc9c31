// Decoding controls against Hugging Face's generate() on ../shared/golden/controls (the demo
// model, the first 200 dev lines, one control at a time, greedy and beam 4): every line's tokens
// must be identical, its score and per-token log-probabilities equal within float noise. All
// lines of one case go through one Engine as separate jobs, so rows with different prefixes
// and controls share decoder steps.
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/synchronization/notification.h"
#include "common/test_util.h"
#include "engine/engine.h"

namespace glossa {
namespace {

struct ControlLine {
  std::vector<int> src_ids;
  std::vector<int> out_ids;  // without the decoder start
  std::string target_prefix;
  std::vector<int> prefix_ids;
  std::vector<double> token_logprobs;  // one per out_ids token (the prefix's included)
  double score = 0.0;
};

std::vector<ControlLine> ReadControls(const std::string& control, const std::string& mode) {
  std::vector<ControlLine> lines;
  std::ifstream in(testing::SharedDir() + "/golden/controls/" + control + "/" + mode + ".jsonl");
  std::string text;
  while (std::getline(in, text)) {
    const auto j = nlohmann::json::parse(text);
    ControlLine l;
    l.src_ids = j["src_ids"].get<std::vector<int>>();
    l.out_ids = j["out_ids"].get<std::vector<int>>();
    l.out_ids.erase(l.out_ids.begin());
    l.target_prefix = j.value("target_prefix", "");
    l.prefix_ids = j.value("prefix_ids", std::vector<int>());
    l.token_logprobs = j["token_logprobs"].get<std::vector<double>>();
    l.score = j["score"].get<double>();
    lines.push_back(std::move(l));
  }
  return lines;
}

TranslateOptions Options(const std::string& control, const std::string& mode,
                         const ControlLine& line) {
  TranslateOptions o;
  o.beam_size = mode == "greedy" ? 1 : 4;
  o.max_output_tokens = 256;
  o.token_scores = true;
  if (control == "repetition_penalty") o.repetition_penalty = 1.3f;
  if (control == "no_repeat_ngram_size") o.no_repeat_ngram_size = 3;
  if (control == "min_new_tokens") o.min_output_tokens = 20;
  if (control == "target_prefix") o.target_prefix = line.target_prefix;
  return o;
}

struct Outcome {
  absl::Notification done;
  JobResult result;
};

void CheckControl(const std::string& control, const std::string& mode) {
  const auto golden = ReadControls(control, mode);
  ASSERT_EQ(golden.size(), 200u) << control << "/" << mode;
  EngineOptions e;
  e.max_active_sequences = 32;
  Engine engine(testing::DemoModel(), e);
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (const ControlLine& line : golden) {
    auto search = engine.Resolve(Options(control, mode, line));
    ASSERT_TRUE(search.ok()) << search.status();
    EXPECT_EQ(search->prefix, line.prefix_ids) << line.target_prefix;
    auto job = std::make_shared<Job>();
    job->sources = {line.src_ids};
    job->search = *search;
    outcomes.push_back(std::make_unique<Outcome>());
    Outcome* outcome = outcomes.back().get();
    job->on_done = [outcome](JobResult r) {
      outcome->result = std::move(r);
      outcome->done.Notify();
    };
    ASSERT_TRUE(engine.Submit(job).ok());
  }
  int identical = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->done.WaitForNotificationWithTimeout(absl::Seconds(300)));
    ASSERT_TRUE(outcomes[i]->result.ok()) << outcomes[i]->result.status();
    const Hypothesis& best = (*outcomes[i]->result)[0][0];
    const ControlLine& g = golden[i];
    if (best.tokens != g.out_ids) {
      size_t k = 0;
      while (k < best.tokens.size() && k < g.out_ids.size() && best.tokens[k] == g.out_ids[k]) ++k;
      ADD_FAILURE() << control << "/" << mode << " line " << i << " differs at token " << k;
      continue;
    }
    ++identical;
    EXPECT_NEAR(best.score, g.score, 1e-3 * std::max(1.0, std::abs(g.score)))
        << control << "/" << mode << " line " << i;
    ASSERT_EQ(best.token_scores.size(), g.token_logprobs.size()) << "line " << i;
    for (size_t t = 0; t < g.token_logprobs.size(); ++t) {
      EXPECT_NEAR(best.token_scores[t], g.token_logprobs[t], 1e-3)
          << control << "/" << mode << " line " << i << " token " << t;
    }
  }
  std::printf("%s/%s: %d of %zu lines identical to Hugging Face\n", control.c_str(),
              mode.c_str(), identical, golden.size());
  EXPECT_EQ(identical, static_cast<int>(golden.size()));
}

class ControlsTest : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(ControlsTest, MatchesHuggingFace) {
  GLOSSA_REQUIRE_SHARED();
  if (!std::ifstream(testing::SharedDir() + "/golden/controls/README.md").good()) {
    GTEST_SKIP() << "needs ../shared/golden/controls";
  }
  CheckControl(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Golden, ControlsTest,
    ::testing::Combine(::testing::Values("repetition_penalty", "no_repeat_ngram_size",
                                         "min_new_tokens", "target_prefix"),
                       ::testing::Values("greedy", "beam4")),
    [](const auto& info) {
      return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
    });

}  // namespace
}  // namespace glossa
