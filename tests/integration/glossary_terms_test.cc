// Glossary terms become the constraints Hugging Face forces: for every case of
// ../shared/golden/constraints, a glossary whose source terms occur in the line's text, with the
// case's target terms, gives exactly the case's force_words_ids (GlossaryConstraints: term
// matching and target encoding). constraints_test checks that the engine, given those ids,
// translates as Hugging Face does; test_glossary_requests.py checks the server's path.
#include <gmock/gmock.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/force_words_ids.h"
#include "common/test_util.h"
#include "engine/model.h"
#include "engine/text_job.h"

namespace glossa {
namespace {

struct Golden {
  const char* name;
  const char* folder;  // of ../shared/golden/constraints
  const char* model;   // "demo", or the file stem in GLOSSA_FAMILY_MODEL_DIR
};

const Golden kGoldens[] = {{"marian", "opus-mt-es-en-bible", "demo"},
                           {"nllb", "opus-bible-nllb-es-en", "nllb"}};

std::string ModelPath(const Golden& g) {
  if (std::string(g.model) == "demo") return testing::DemoModelPath();
  return std::string(GLOSSA_FAMILY_MODEL_DIR) + "/" + g.model + ".glossa";
}

// Words of `text` that a glossary can name: runs of letters (ASCII or not) of 3 bytes or more.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalpha(u)) {
      word += c;
    } else {
      if (word.size() >= 3) words.push_back(word);
      word.clear();
    }
  }
  return words;
}

// The case's terms as a glossary: entry k's source is the k-th word of the text (so
// that every entry occurs, in entry order), its targets the case's term k (either: both
// alternatives in one entry).
std::vector<GlossaryTerm> Glossary(const nlohmann::json& line) {
  const std::vector<std::string> words = Words(line["src"].get<std::string>());
  std::vector<GlossaryTerm> terms;
  const auto& case_terms = line["terms"];
  for (size_t k = 0; k < case_terms.size(); ++k) {
    GlossaryTerm term;
    term.source = words.at(k);
    if (case_terms[k].is_array()) {
      term.targets = case_terms[k].get<std::vector<std::string>>();
    } else {
      term.targets = {case_terms[k].get<std::string>()};
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

class GlossaryTermsTest : public ::testing::TestWithParam<Golden> {};

TEST_P(GlossaryTermsTest, BecomeHuggingFacesForceWordsIds) {
  const std::string path =
      testing::SharedDir() + "/golden/constraints/" + GetParam().folder + "/constraints.jsonl";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "needs the shared golden data at " << path;
  if (!std::ifstream(ModelPath(GetParam()))) {
    GTEST_SKIP() << "needs " << ModelPath(GetParam())
                 << ", converted by the ctest fixture family_models (ctest -R family)";
  }
  auto model = Model::Load(ModelPath(GetParam()));
  ASSERT_TRUE(model.ok()) << model.status();
  int cases = 0;
  std::string text;
  while (std::getline(in, text)) {
    const auto line = nlohmann::json::parse(text);
    const std::vector<std::string> texts = {line["src"].get<std::string>()};
    auto sources = TokenizeTexts(**model, texts);
    ASSERT_TRUE(sources.ok()) << sources.status();
    auto constraints = GlossaryConstraints(**model, texts, *sources, Glossary(line), 16);
    ASSERT_TRUE(constraints.ok()) << constraints.status();
    ASSERT_EQ(constraints->size(), 1u);
    const std::vector<Constraint> want = testing::ParseForceWordsIds(line["force_words_ids"]);
    ASSERT_EQ((*constraints)[0].size(), want.size()) << line["i"] << " " << line["case"];
    for (size_t c = 0; c < want.size(); ++c) {
      EXPECT_EQ((*constraints)[0][c].alternatives, want[c].alternatives)
          << GetParam().name << " line " << line["i"] << " " << line["case"] << " term " << c;
    }
    ++cases;
  }
  std::printf("%s: %d cases, every glossary gave Hugging Face's force_words_ids\n", GetParam().name,
              cases);
  EXPECT_GT(cases, 0);
}

INSTANTIATE_TEST_SUITE_P(Goldens, GlossaryTermsTest, ::testing::ValuesIn(kGoldens),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(GlossaryConstraintsTest, NamesWhatItRefuses) {
  auto model = Model::Load(testing::DemoModelPath());
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<std::string> texts = {"Sea la luz.", "", "la tierra y la luz"};
  auto sources = TokenizeTexts(**model, texts);
  ASSERT_TRUE(sources.ok());
  // Per source (the empty text has none), in entry order; an entry that occurs nowhere adds none.
  auto ok = GlossaryConstraints(**model, texts, *sources,
                                {{"mar", {"sea"}}, {"tierra", {"earth"}}, {"luz", {"light"}}}, 16);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].size(), 1u);
  EXPECT_EQ((*ok)[1].size(), 2u);
  const std::vector<int> earth = *(*model)->tokenizer().EncodeTarget("earth");
  const std::vector<int> light = *(*model)->tokenizer().EncodeTarget("light");
  EXPECT_EQ((*ok)[0][0].alternatives, std::vector<std::vector<int>>{light});
  EXPECT_EQ((*ok)[1][0].alternatives, std::vector<std::vector<int>>{earth});
  EXPECT_EQ((*ok)[1][1].alternatives, std::vector<std::vector<int>>{light});
  // No term occurs: no constraints at all.
  auto none = GlossaryConstraints(**model, texts, *sources, {{"mar", {"sea"}}}, 16);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // Too many terms in one text, named by its index.
  auto many =
      GlossaryConstraints(**model, texts, *sources, {{"tierra", {"earth"}}, {"luz", {"light"}}}, 1);
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(std::string(many.status().message()), ::testing::HasSubstr("text 2"));
  // Targets of which one starts the other as tokens, named by the entry.
  auto prefix =
      GlossaryConstraints(**model, texts, *sources, {{"luz", {"light", "light of the world"}}}, 16);
  ASSERT_FALSE(prefix.ok());
  EXPECT_THAT(std::string(prefix.status().message()),
              ::testing::HasSubstr("glossary entry 0: as tokens, target 0 starts target 1"));
  // An empty or invalid target.
  auto empty = GlossaryConstraints(**model, texts, *sources, {{"luz", {""}}}, 16);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), ::testing::HasSubstr("entry 0, target 0"));
  auto bad = GlossaryConstraints(**model, texts, *sources, {{"luz", {"lig\xFFht"}}}, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("UTF-8"));
}

}  // namespace
}  // namespace glossa
