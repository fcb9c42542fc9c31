// The language rules of text/languages.h: a multilingual table (as the converter writes it for
// NLLB-200) and the bilingual demo model (Marian es -> en), which is in the repository.
#include "text/languages.h"

#include <tuple>

#include "common/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa {
namespace {

ModelInfo Multilingual() {
  ModelInfo info;
  for (const auto& [code, id, iso1, iso3] :
       std::vector<std::tuple<const char*, int, const char*, const char*>>{
           {"eng_Latn", 7, "en", "eng"},
           {"spa_Latn", 8, "es", "spa"},
           {"zho_Hans", 9, "zh", "zho"},
           {"zho_Hant", 10, "zh", "zho"},
           {"yue_Hant", 11, "zh", "yue"},
           {"ace_Latn", 12, "", "ace"}}) {
    info.languages.push_back({code, code, id, iso1, iso3});
  }
  return info;
}

class LanguagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::DemoModel();
    ASSERT_NE(model_, nullptr);
  }
  absl::StatusOr<LanguagePair> Multi(const char* source, const char* target) {
    return ResolveLanguages(Multilingual(), model_->tokenizer(), source, target);
  }
  absl::StatusOr<LanguagePair> Demo(const char* source, const char* target) {
    return ResolveLanguages(model_->info(), model_->tokenizer(), source, target);
  }
  std::shared_ptr<const Model> model_;
};

TEST_F(LanguagesTest, MultilingualCodesByOwnFormIsoCodeAndCase) {
  for (auto [source, target] :
       {std::pair{"spa_Latn", "eng_Latn"}, {"es", "en"}, {"spa", "eng"}, {"SPA_latn", "ENG"}}) {
    auto pair = Multi(source, target);
    ASSERT_TRUE(pair.ok()) << source << " " << target << ": " << pair.status();
    EXPECT_EQ(pair->source_token, 8);
    EXPECT_EQ(pair->forced_bos_id, 7);
  }
  auto ace = Multi("ace", "zho_Hant");
  ASSERT_TRUE(ace.ok()) << ace.status();
  EXPECT_EQ(ace->source_token, 12);
  EXPECT_EQ(ace->forced_bos_id, 10);
}

TEST_F(LanguagesTest, MultilingualErrorsListTheChoices) {
  auto missing = Multi("es", "");
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::AllOf(::testing::HasSubstr("target_language is missing"),
                               ::testing::HasSubstr("eng_Latn, spa_Latn, zho_Hans")));
  auto ambiguous = Multi("zh", "en");
  ASSERT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ambiguous.status().message()),
              ::testing::HasSubstr("'zh' is ambiguous for this model: it may be zho_Hans, "
                                   "zho_Hant, yue_Hant"));
  auto unknown = Multi("es", "fra");
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()),
              ::testing::HasSubstr("target_language 'fra' is not a language of this model"));
}

TEST_F(LanguagesTest, BilingualModelTakesEmptyOrItsOwnLanguages) {
  for (auto [source, target] : {std::pair{"", ""}, {"es", "en"}, {"spa", "eng"}, {"ES", ""}}) {
    auto pair = Demo(source, target);
    ASSERT_TRUE(pair.ok()) << source << " " << target << ": " << pair.status();
    EXPECT_EQ(pair->source_token, -1);
    EXPECT_EQ(pair->forced_bos_id, -1);
  }
  auto wrong = Demo("", "fr");
  ASSERT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::HasSubstr("only knows 'en'"));
  EXPECT_EQ(Demo("de", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SourceLanguages(model_->info()), std::vector<std::string>{"es"});
  EXPECT_EQ(TargetLanguages(model_->info(), model_->tokenizer()), std::vector<std::string>{"en"});
}

TEST(Iso639Test, TwoLetterCodesMapToThreeLetterOnes) {
  EXPECT_EQ(Iso639_3("es"), "spa");
  EXPECT_EQ(Iso639_3("ZH"), "zho");
  EXPECT_EQ(Iso639_3("spa"), "spa");
  EXPECT_EQ(Iso639_3("xx"), "xx");
}

}  // namespace
}  // namespace glossa
