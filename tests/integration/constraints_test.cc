// Constrained beam search (SearchOptions::constraints) against Hugging Face's
// generate(num_beams=4, force_words_ids=...) on ../shared/golden/constraints (transformers 4.47.1,
// fp32, batch 1): the Marian demo model (150 dev lines) and the NLLB test model (60 lines), each
// line with up to five cases (one word, a two-word phrase, two words, either of two words, a word
// the unconstrained output has). Every case goes through one Engine as a job of its own; its
// tokens must equal Hugging Face's, its score within 1e-4, and every forced term must appear.
//
// The NLLB model is converted from ../shared/models by the ctest fixture family_models (into the
// build directory), not stored in the repository.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/force_words_ids.h"
#include "common/test_util.h"
#include "engine/engine.h"
#include "ops/ops.h"

namespace glossa {
namespace {

struct Golden {
  const char* name;
  const char* folder;  // of ../shared/golden/constraints
  const char* model;   // "demo", or the file stem in GLOSSA_FAMILY_MODEL_DIR
  const char* source_language;
  const char* target_language;
};

const Golden kGoldens[] = {
    {"marian", "opus-mt-es-en-bible", "demo", "", ""},
    {"nllb", "opus-bible-nllb-es-en", "nllb", "spa_Latn", "eng_Latn"},
};

void PrintTo(const Golden& g, std::ostream* os) { *os << g.name; }

std::string GoldenDir(const Golden& g) {
  return testing::SharedDir() + "/golden/constraints/" + g.folder;
}

std::string ModelPath(const Golden& g) {
  if (std::string(g.model) == "demo") return testing::DemoModelPath();
  return std::string(GLOSSA_FAMILY_MODEL_DIR) + "/" + g.model + ".glossa";
}

struct ConstraintLine {
  int index = 0;  // the dev line
  std::string kase;
  std::vector<int> src_ids;
  std::vector<Constraint> constraints;
  std::vector<int> out_ids;  // without the decoder start
  double score = 0.0;
};

std::vector<ConstraintLine> ReadConstraintGolden(const Golden& g) {
  std::vector<ConstraintLine> lines;
  std::ifstream in(GoldenDir(g) + "/constraints.jsonl");
  std::string text;
  while (std::getline(in, text)) {
    const auto j = nlohmann::json::parse(text);
    ConstraintLine l;
    l.index = j["i"].get<int>();
    l.kase = j["case"].get<std::string>();
    l.src_ids = j["src_ids"].get<std::vector<int>>();
    l.constraints = testing::ParseForceWordsIds(j["force_words_ids"]);
    l.out_ids = j["out_ids"].get<std::vector<int>>();
    l.out_ids.erase(l.out_ids.begin());
    l.score = j["score"].get<double>();
    lines.push_back(std::move(l));
  }
  return lines;
}

bool Contains(const std::vector<int>& tokens, const std::vector<int>& phrase) {
  return std::search(tokens.begin(), tokens.end(), phrase.begin(), phrase.end()) != tokens.end();
}

// Every constraint has an alternative in `tokens`.
bool MeetsConstraints(const std::vector<int>& tokens, const std::vector<Constraint>& constraints) {
  for (const Constraint& c : constraints) {
    bool found = false;
    for (const auto& alternative : c.alternatives) found |= Contains(tokens, alternative);
    if (!found) return false;
  }
  return true;
}

struct Outcome {
  absl::Notification done;
  JobResult result;
};

class ConstraintsTest : public ::testing::TestWithParam<Golden> {
 protected:
  void SetUp() override {
    if (!std::ifstream(GoldenDir(GetParam()) + "/constraints.jsonl")) {
      GTEST_SKIP() << "needs the shared golden data at " << GoldenDir(GetParam())
                   << " (set -DGLOSSA_SHARED_DIR); it is not part of the repository";
    }
    if (!std::ifstream(ModelPath(GetParam()))) {
      GTEST_SKIP() << "needs " << ModelPath(GetParam())
                   << ", converted by the ctest fixture family_models (ctest -R family)";
    }
    auto model = Model::Load(ModelPath(GetParam()));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  // The golden settings, through Resolve as for any request, plus the line's constraints.
  SearchOptions Options(const Engine& engine, const ConstraintLine& line) const {
    TranslateOptions t;
    t.beam_size = 4;
    t.max_output_tokens = 128;
    t.source_language = GetParam().source_language;
    t.target_language = GetParam().target_language;
    auto search = engine.Resolve(t);
    EXPECT_TRUE(search.ok()) << search.status();
    SearchOptions s = search.ok() ? *search : SearchOptions();
    s.constraints = line.constraints;
    return s;
  }

  // Our log-probability of our token minus that of the golden one at the first differing step
  // (teacher-forced on the shared prefix): tiny for a floating-point near-tie.
  float Margin(const ConstraintLine& line, const std::vector<int>& mine, size_t k) const {
    if (k >= mine.size() || k >= line.out_ids.size()) return NAN;
    std::vector<int> prefix = {model_->config().decoder_start_id};
    prefix.insert(prefix.end(), line.out_ids.begin(), line.out_ids.begin() + k);
    auto logits = testing::TeacherForcedLogits(*model_, line.src_ids, prefix);
    std::vector<float>& row = logits.back();
    ops::LogSoftmax(row.data(), row.size());
    return row[mine[k]] - row[line.out_ids[k]];
  }

  // The engine's SearchVocab (Engine's constructor makes it the same way).
  SearchVocab Vocab() const {
    const ModelConfig& c = model_->config();
    SearchVocab v;
    v.vocab_size = c.target_vocab_size;
    v.eos_id = c.eos_id;
    v.decoder_start_id = c.decoder_start_id;
    v.forced_eos_id = model_->info().generation.forced_eos_id;
    v.banned_ids = c.banned_ids;
    return v;
  }

  std::shared_ptr<const Model> model_;
};

TEST_P(ConstraintsTest, MatchesHuggingFace) {
  const auto golden = ReadConstraintGolden(GetParam());
  ASSERT_FALSE(golden.empty());
  const auto kwargs =
      nlohmann::json::parse(std::ifstream(GoldenDir(GetParam()) + "/gen_kwargs.json"));
  EngineOptions e;
  e.max_active_sequences = 32;
  Engine engine(model_, e);
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (const ConstraintLine& line : golden) {
    const SearchOptions search = Options(engine, line);
    ASSERT_EQ(search.length_penalty, kwargs["length_penalty"].get<float>());
    ASSERT_EQ(search.early_stopping, kwargs["early_stopping"].get<bool>());
    ASSERT_EQ(search.max_new_tokens, kwargs["max_new_tokens"].get<int>());
    ASSERT_TRUE(ValidateConstraints(search, Vocab()).ok()) << "line " << line.index;
    auto job = std::make_shared<Job>();
    job->sources = {line.src_ids};
    job->search = search;
    outcomes.push_back(std::make_unique<Outcome>());
    Outcome* outcome = outcomes.back().get();
    job->on_done = [outcome](JobResult r) {
      outcome->result = std::move(r);
      outcome->done.Notify();
    };
    ASSERT_TRUE(engine.Submit(job).ok());
  }
  int identical = 0, met = 0;
  double worst = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->done.WaitForNotificationWithTimeout(absl::Seconds(600)));
    ASSERT_TRUE(outcomes[i]->result.ok()) << outcomes[i]->result.status();
    const Hypothesis& best = (*outcomes[i]->result)[0][0];
    const ConstraintLine& g = golden[i];
    met += MeetsConstraints(best.tokens, g.constraints);
    EXPECT_TRUE(MeetsConstraints(best.tokens, g.constraints))
        << GetParam().name << " line " << g.index << " " << g.kase << ": a forced term is missing";
    if (best.tokens != g.out_ids) {
      size_t k = 0;
      while (k < best.tokens.size() && k < g.out_ids.size() && best.tokens[k] == g.out_ids[k]) ++k;
      std::printf(
          "%s mismatch: case %zu (line %d, %s) at step %zu: ours %d, golden %d, "
          "log-prob margin %.6f\n",
          GetParam().name, i, g.index, g.kase.c_str(), k,
          k < best.tokens.size() ? best.tokens[k] : -1, k < g.out_ids.size() ? g.out_ids[k] : -1,
          Margin(g, best.tokens, k));
      continue;
    }
    ++identical;
    worst = std::max(worst, std::abs(best.score - g.score));
    EXPECT_NEAR(best.score, g.score, 1e-4) << GetParam().name << " case " << i;
  }
  std::printf(
      "%s: %d of %zu constrained cases identical to Hugging Face; forced terms in %d; "
      "largest score difference %.3g\n",
      GetParam().name, identical, golden.size(), met, worst);
  EXPECT_GE(identical, std::ceil(0.995 * golden.size()));
}

INSTANTIATE_TEST_SUITE_P(Goldens, ConstraintsTest, ::testing::ValuesIn(kGoldens),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glossa
