// Which glossary terms a text holds: whole words, case-insensitive, after NFKC.
#include "text/glossary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace glossa {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Match(const std::vector<std::string>& sources, const std::string& text) {
  std::vector<GlossaryTerm> terms;
  for (const std::string& s : sources) terms.push_back({s, {"x"}});
  auto matcher = GlossaryMatcher::Create(terms);
  EXPECT_TRUE(matcher.ok()) << matcher.status();
  return matcher.ok() ? matcher->Match(text) : std::vector<int>{};
}

TEST(GlossaryMatcherTest, WholeWordsOnly) {
  EXPECT_THAT(Match({"luz"}, "Sea la luz."), ElementsAre(0));
  EXPECT_THAT(Match({"luz"}, "luz"), ElementsAre(0));
  EXPECT_THAT(Match({"luz"}, "Las luces, la luzerna y traslúz"), IsEmpty());
  EXPECT_THAT(Match({"luz"}, "(luz)"), ElementsAre(0));
  // A later occurrence counts when an earlier one is inside a word.
  EXPECT_THAT(Match({"luz"}, "traluz y luz"), ElementsAre(0));
  EXPECT_THAT(Match({"2"}, "de 12 a 2"), ElementsAre(0));
  EXPECT_THAT(Match({"2"}, "de 12 a 20"), IsEmpty());
}

TEST(GlossaryMatcherTest, PhrasesAndOrder) {
  EXPECT_THAT(Match({"tierra", "los cielos", "cielos y la"},
                    "En el principio creó Dios los cielos y la tierra."),
              ElementsAre(0, 1, 2));
  EXPECT_THAT(Match({"los  cielos"}, "los cielos"), IsEmpty());    // inner spaces are kept
  EXPECT_THAT(Match({" cielos "}, "los cielos"), ElementsAre(0));  // outer ones are not
}

TEST(GlossaryMatcherTest, CaseAndUnicodeForms) {
  EXPECT_THAT(Match({"Señor"}, "EL SEÑOR DIJO"), ElementsAre(0));
  EXPECT_THAT(Match({"STRASSE"}, "die Straße"), ElementsAre(0));  // full case folding
  // Composed ñ (U+00F1) against n + combining tilde (U+0303), both ways.
  EXPECT_THAT(Match({"se\xC3\xB1or"}, "el sen\xCC\x83or"), ElementsAre(0));
  EXPECT_THAT(Match({"sen\xCC\x83or"}, "el se\xC3\xB1or"), ElementsAre(0));
  // Compatibility forms: the ligature "ﬁ" and full-width letters.
  EXPECT_THAT(Match({"fin"}, "el \xEF\xAC\x81n"), ElementsAre(0));
  EXPECT_THAT(Match({"dios"}, "\xEF\xBC\xA4\xEF\xBD\x89\xEF\xBD\x8F\xEF\xBD\x93"), ElementsAre(0));
  // A combining mark after the term continues the word: "se" does not match "sé" spelt
  // s + e + U+0301.
  EXPECT_THAT(Match({"se"}, "yo se\xCC\x81"), IsEmpty());
}

TEST(GlossaryMatcherTest, RefusesTermsThatCannotMatch) {
  auto empty = GlossaryMatcher::Create({{"luz", {"light"}}, {"", {"x"}}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), ::testing::HasSubstr("entry 1"));
  // A soft hyphen alone normalises to nothing, and white space is trimmed.
  EXPECT_FALSE(GlossaryMatcher::Create({{" \t", {"x"}}}).ok());
  EXPECT_FALSE(GlossaryMatcher::Create({{"\xC2\xAD", {"x"}}}).ok());
  auto bad = GlossaryMatcher::Create({{"lu\xFFz", {"light"}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("UTF-8"));
}

TEST(GlossaryMatcherTest, NoTermsMatchNothing) { EXPECT_THAT(Match({}, "luz"), IsEmpty()); }

}  // namespace
}  // namespace glossa
