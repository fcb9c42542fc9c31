// Sentence breaks (ICU) and documents: split, cut to the model's limit, joined back.
#include "engine/document.h"

#include "common/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/sentences.h"

namespace glossa {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Sentences(absl::string_view text, absl::string_view language) {
  auto spans = SplitSentences(text, language);
  EXPECT_TRUE(spans.ok()) << spans.status();
  std::vector<std::string> out;
  for (const TextSpan& s : *spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(SentencesTest, SplitsAtSentenceEndsAndNewlinesWithoutTheSpaces) {
  EXPECT_THAT(Sentences("¿Cómo estás? Muy bien.  Y tú!\nFin", "es"),
              ElementsAre("¿Cómo estás?", "Muy bien.", "Y tú!", "Fin"));
  EXPECT_THAT(Sentences("  \n\n ", "es"), ElementsAre());
  EXPECT_THAT(Sentences("", "es"), ElementsAre());
}

TEST(SentencesTest, KnownAbbreviationsDoNotEndASentence) {
  EXPECT_THAT(Sentences("Vino el Sr. García. Se fue.", "es"),
              ElementsAre("Vino el Sr. García.", "Se fue."));
  EXPECT_THAT(Sentences("Mr. Smith came. He left.", "en"),
              ElementsAre("Mr. Smith came.", "He left."));
}

TEST(SentencesTest, AnyLanguageCodeWorks) {
  for (const char* language : {"", "spa_Latn", "es_XX", "zz", "not a language at all"}) {
    EXPECT_THAT(Sentences("Uno. Dos.", language), ElementsAre("Uno.", "Dos.")) << language;
  }
}

TEST(DocumentTest, KeepsTheWhitespaceAroundSentences) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  const std::vector<std::string> texts = {" Uno. Dos.\n\nTres.\t", "", "   "};
  auto documents = SplitDocuments(*model, texts, "es");
  ASSERT_TRUE(documents.ok()) << documents.status();
  EXPECT_THAT(documents->sentences, ElementsAre("Uno.", "Dos.", "Tres."));
  ASSERT_EQ(documents->texts.size(), 3u);
  EXPECT_THAT(documents->texts[0].gaps, ElementsAre(" ", " ", "\n\n", "\t"));
  EXPECT_THAT(documents->texts[1].gaps, ElementsAre(""));
  EXPECT_THAT(documents->texts[2].gaps, ElementsAre("   "));

  // Join: sentence k's hypotheses in the text's places; n-best by position.
  std::vector<Translation> sentences(3);
  sentences[0].hypotheses = {{"One.", -1.0f, {1}, {}}, {"1.", -2.0f, {2}, {}}};
  sentences[1].hypotheses = {{"Two.", -1.5f, {3}, {}}};
  sentences[2].hypotheses = {{"Three.", -0.5f, {4}, {}}, {"3.", -3.0f, {5}, {}}};
  const std::vector<Translation> joined = JoinDocuments(*documents, sentences);
  ASSERT_EQ(joined.size(), 3u);
  ASSERT_EQ(joined[0].hypotheses.size(), 2u);
  EXPECT_EQ(joined[0].hypotheses[0].text, " One. Two.\n\nThree.\t");
  EXPECT_EQ(joined[0].hypotheses[1].text, " 1. Two.\n\n3.\t");
  EXPECT_FLOAT_EQ(joined[0].hypotheses[0].score, -3.0f);
  EXPECT_THAT(joined[0].hypotheses[1].token_ids, ElementsAre(2, 3, 5));
  EXPECT_EQ(joined[1].hypotheses[0].text, "");
  EXPECT_EQ(joined[2].hypotheses[0].text, "   ");
}

TEST(DocumentTest, CutsOverlongSentencesToTheLimitAtClauseBoundaries) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  std::string sentence;
  for (int i = 0; i < 40; ++i) sentence += "y la tierra estaba desordenada y vacía, ";
  sentence += "y fue.";
  const int limit = 32;
  auto documents = SplitDocuments(*model, {sentence}, "es", limit);
  ASSERT_TRUE(documents.ok()) << documents.status();
  ASSERT_GT(documents->sentences.size(), 1u);
  std::string rebuilt = documents->texts[0].gaps[0];
  for (size_t i = 0; i < documents->sentences.size(); ++i) {
    const std::string& piece = documents->sentences[i];
    auto ids = model->tokenizer().EncodeSource(piece);
    ASSERT_TRUE(ids.ok());
    EXPECT_LE(static_cast<int>(ids->size()), limit) << piece;
    EXPECT_EQ(piece.back(), i + 1 < documents->sentences.size() ? ',' : '.') << piece;
    rebuilt += piece + documents->texts[0].gaps[i + 1];
  }
  EXPECT_EQ(rebuilt, sentence);  // nothing lost, nothing added
}

TEST(DocumentTest, APieceWithoutSpacesIsCutBetweenCharacters) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  std::string word;
  for (int i = 0; i < 300; ++i) word += "ñá";  // two-byte characters: never cut inside one
  auto documents = SplitDocuments(*model, {word}, "es", 16);
  ASSERT_TRUE(documents.ok()) << documents.status();
  std::string rebuilt;
  for (const std::string& piece : documents->sentences) {
    EXPECT_TRUE(IsValidUtf8(piece));
    rebuilt += piece;
  }
  EXPECT_EQ(rebuilt, word);
}

TEST(DocumentTest, InvalidUtf8IsRefusedWithTheTextsIndex) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  auto documents = SplitDocuments(*model, {"bien", "mal \xff"}, "es");
  ASSERT_FALSE(documents.ok());
  EXPECT_EQ(documents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(documents.status().message()), ::testing::HasSubstr("text 1"));
}

}  // namespace
}  // namespace glossa
