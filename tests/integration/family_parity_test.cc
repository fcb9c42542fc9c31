// Parity of the multilingual families with Hugging Face's generate() on ../shared/golden/<model>/
// (transformers 4.47.1, fp32, batch 1): M2M100, NLLB-200 and mBART-50, every one of the 417 dev
// lines, greedy and beam 4, token for token; and the tokenizer: source ids with the language
// token, and the text of the golden ids.
//
// The models are converted from ../shared/models by the ctest fixture family_models (into the
// build directory), not stored in the repository.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

#include "common/test_util.h"
#include "engine/translator.h"
#include "ops/argmax_screen.h"
#include "text/languages.h"

namespace glossa {
namespace {

struct Family {
  const char* name;    // the file stem in GLOSSA_FAMILY_MODEL_DIR
  const char* golden;  // the folder of ../shared/golden
  const char* source_language;
  const char* target_language;
};

const Family kFamilies[] = {
    {"m2m100", "opus-bible-m2m100-es-en", "es", "en"},
    {"nllb", "opus-bible-nllb-es-en", "spa_Latn", "eng_Latn"},
    {"mbart50", "opus-bible-mbart50-es-en", "es_XX", "en_XX"},
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

std::string ModelPath(const Family& f) {
  return std::string(GLOSSA_FAMILY_MODEL_DIR) + "/" + f.name + ".glossa";
}

class FamilyParityTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    if (!std::ifstream(testing::SharedDir() + "/golden/" + GetParam().golden + "/greedy.jsonl")) {
      GTEST_SKIP() << "needs the shared golden data at " << testing::SharedDir() << "/golden/"
                   << GetParam().golden << " (set -DGLOSSA_SHARED_DIR)";
    }
    if (!std::ifstream(ModelPath(GetParam()))) {
      GTEST_SKIP() << "needs " << ModelPath(GetParam())
                   << ", converted by the ctest fixture family_models (ctest -R family)";
    }
    auto model = Model::Load(ModelPath(GetParam()));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::vector<testing::GoldenLine> Golden(const char* mode) const {
    return testing::ReadGolden(std::string(GetParam().golden) + "/" + mode);
  }

  // Translates the golden sources (their own ids) and counts the lines identical to Hugging Face.
  int Identical(const std::vector<testing::GoldenLine>& golden, int beam_size,
                std::vector<std::vector<Hypothesis>>* out, bool scores = true,
                int max_batch_size = TranslatorOptions().max_batch_size) const {
    TranslatorOptions translator_options;
    translator_options.max_batch_size = max_batch_size;
    Translator translator(model_, translator_options);
    TranslateOptions opts;
    opts.scores = scores;
    opts.beam_size = beam_size;
    opts.num_hypotheses = beam_size;
    opts.source_language = GetParam().source_language;
    opts.target_language = GetParam().target_language;
    std::vector<std::vector<int>> sources;
    for (const auto& g : golden) sources.push_back(g.src_ids);
    auto ours = translator.TranslateIds(sources, opts);
    EXPECT_TRUE(ours.ok()) << ours.status();
    if (!ours.ok()) return -1;
    int identical = 0;
    for (size_t i = 0; i < golden.size(); ++i) {
      const auto& mine = (*ours)[i][0].tokens;
      if (mine == golden[i].out_ids) {
        ++identical;
        continue;
      }
      size_t k = 0;
      while (k < mine.size() && k < golden[i].out_ids.size() && mine[k] == golden[i].out_ids[k]) {
        ++k;
      }
      std::printf("%s beam %d: line %zu differs at step %zu\n", GetParam().name, beam_size, i, k);
    }
    std::printf("%s beam %d: %d of %zu lines identical to Hugging Face\n", GetParam().name,
                beam_size, identical, golden.size());
    *out = *std::move(ours);
    return identical;
  }

  std::shared_ptr<const Model> model_;
};

TEST_P(FamilyParityTest, TokenizerMatchesHuggingFace) {
  const auto golden = Golden("greedy");
  ASSERT_EQ(golden.size(), 417u);
  auto languages = ResolveLanguages(model_->info(), model_->tokenizer(), GetParam().source_language,
                                    GetParam().target_language);
  ASSERT_TRUE(languages.ok()) << languages.status();
  EXPECT_EQ(golden[0].out_ids[0], languages->forced_bos_id);
  int sources = 0, texts = 0;
  for (const auto& g : golden) {
    auto ids = model_->tokenizer().EncodeSource(g.src, languages->source_token);
    ASSERT_TRUE(ids.ok());
    sources += *ids == g.src_ids;
    // The language token is special: it never reaches the text.
    texts += model_->tokenizer().DecodeTarget(g.out_ids) == g.hyp;
  }
  EXPECT_EQ(sources, 417);
  EXPECT_EQ(texts, 417);
}

TEST_P(FamilyParityTest, GreedyMatchesHuggingFace) {
  const auto golden = Golden("greedy");
  std::vector<std::vector<Hypothesis>> ours;
  EXPECT_EQ(Identical(golden, 1, &ours), static_cast<int>(golden.size()));
}

// Greedy without scores, at most ArgMaxScreen::kMaxRows (64) sentences together, on the first 100
// lines: every step takes its token from the output projection's screen (ops/argmax_screen.h;
// NLLB's 256,206 ids), not from the logits, or is a step of forced language tokens only, which
// computes no logits at all (Search::ForcedWithoutRow).
TEST_P(FamilyParityTest, GreedyWithoutScoresMatchesHuggingFace) {
  if (model_->weights().lm_head_screen == nullptr ||
      model_->weights().lm_head_screen->Get() == nullptr) {
    GTEST_SKIP() << "no ArgMaxScreen on this CPU (it needs AVX-512F and AVX-512 VNNI)";
  }
  auto golden = Golden("greedy");
  golden.resize(100);
  std::vector<std::vector<Hypothesis>> ours;
  const ArgMaxScreen::Counts before = ArgMaxScreen::ProcessCounts();
  EXPECT_EQ(Identical(golden, 1, &ours, /*scores=*/false, ArgMaxScreen::kMaxRows), 100);
  const ArgMaxScreen::Counts after = ArgMaxScreen::ProcessCounts();
  int64_t tokens = 0;
  for (const auto& hypotheses : ours) tokens += static_cast<int64_t>(hypotheses[0].tokens.size());
  const int64_t rows = after.rows - before.rows;
  std::printf(
      "%s: screened %lld of %lld tokens; %.2f candidates per screened token\n", GetParam().name,
      static_cast<long long>(rows), static_cast<long long>(tokens),
      static_cast<double>(after.candidates - before.candidates) / std::max<int64_t>(rows, 1));
  // Not screened: the forced language tokens of a step that has nothing else (the first
  // kMaxRows lines start together), and the rare step the screen cannot decide.
  EXPECT_GE(rows, tokens - ArgMaxScreen::kMaxRows - tokens / 100);
}

TEST_P(FamilyParityTest, Beam4MatchesHuggingFace) {
  const auto golden = Golden("beam4");
  std::vector<std::vector<Hypothesis>> ours;
  EXPECT_EQ(Identical(golden, 4, &ours), static_cast<int>(golden.size()));
  // Hugging Face's sequences_scores: the forced language token scores 0 and counts in the length.
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i][0].tokens != golden[i].out_ids) continue;
    worst = std::max(worst, std::abs(ours[i][0].score - golden[i].score));
    EXPECT_NEAR(ours[i][0].score, golden[i].score, 1e-3) << "line " << i;
    for (size_t n = 1; n < ours[i].size(); ++n) {
      EXPECT_GE(ours[i][n - 1].score, ours[i][n].score) << "line " << i;
      EXPECT_EQ(ours[i][n].tokens.front(), golden[i].out_ids.front()) << "line " << i;
    }
  }
  std::printf("%s beam 4: largest difference from Hugging Face's sequence score %.3g\n",
              GetParam().name, worst);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyParityTest, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glossa

namespace glossa {
namespace {

// Two requests for different target languages decode in the same steps: the forced language is
// per sequence, not per batch.
TEST(FamilyBatchingTest, LanguagePairsShareDecoderSteps) {
  const Family& nllb = kFamilies[1];
  if (!std::ifstream(ModelPath(nllb))) GTEST_SKIP() << "needs " << ModelPath(nllb);
  auto model = Model::Load(ModelPath(nllb));
  ASSERT_TRUE(model.ok()) << model.status();
  EngineOptions options;
  options.workers = 0;  // stepped by hand
  Engine engine(*model, options);
  std::vector<JobResult> results(2);
  std::vector<int> forced;
  for (int j = 0; j < 2; ++j) {
    TranslateOptions t;
    t.beam_size = 1;
    t.source_language = "spa_Latn";
    t.target_language = j == 0 ? "eng_Latn" : "fra_Latn";
    auto search = engine.Resolve(t);
    ASSERT_TRUE(search.ok()) << search.status();
    forced.push_back(search->forced_bos_id);
    auto job = std::make_shared<Job>();
    auto pair = ResolveLanguages((*model)->info(), (*model)->tokenizer(), t.source_language,
                                 t.target_language);
    ASSERT_TRUE(pair.ok()) << pair.status();
    auto ids = (*model)->tokenizer().EncodeSource("Y dijo Dios: Sea la luz.", pair->source_token);
    ASSERT_TRUE(ids.ok());
    job->sources = {*ids};
    job->search = *search;
    job->on_done = [&results, j](JobResult r) { results[j] = std::move(r); };
    ASSERT_TRUE(engine.Submit(job).ok());
  }
  ASSERT_NE(forced[0], forced[1]);
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().steps, 1);
  EXPECT_EQ(engine.stats().step_rows, 2) << "both language pairs in the first decoder step";
  while (engine.RunOnce()) {
  }
  for (int j = 0; j < 2; ++j) {
    ASSERT_TRUE(results[j].ok()) << results[j].status();
    EXPECT_EQ((*results[j])[0][0].tokens.front(), forced[j]);
  }
}

}  // namespace
}  // namespace glossa
