// Tokenization equals Hugging Face's MarianTokenizer on the golden data.
#include "text/tokenizer.h"

#include <algorithm>

#include "common/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa {
namespace {

TEST(TokenizerTest, SourceIdsEqualHuggingFace) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  int checked = 0;
  for (const auto& g : testing::ReadGolden("greedy")) {
    auto ids = model->tokenizer().EncodeSource(g.src);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, g.src_ids) << "line " << g.index << ": " << g.src;
    ++checked;
  }
  EXPECT_EQ(checked, 417);
}

TEST(TokenizerTest, DetokenizationEqualsHuggingFace) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  for (const char* name : {"greedy", "beam4"}) {
    for (const auto& g : testing::ReadGolden(name)) {
      EXPECT_EQ(model->tokenizer().DecodeTarget(g.out_ids), g.hyp) << name << " line " << g.index;
    }
  }
}

TEST(TokenizerTest, TargetOffsetsCutTheDecodedTextIntoItsTokens) {
  GLOSSA_REQUIRE_SHARED();
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  int lines = 0;
  for (const auto& g : testing::ReadGolden("greedy")) {
    const std::string text = model->tokenizer().DecodeTarget(g.out_ids);
    const auto offsets = model->tokenizer().TargetOffsets(g.out_ids);
    if (offsets.empty()) continue;  // a text that is not its pieces put together
    ++lines;
    ASSERT_EQ(offsets.size(), g.out_ids.size());
    std::string joined;
    size_t last = 0;
    for (const auto& [begin, end] : offsets) {
      ASSERT_LE(begin, end);
      ASSERT_LE(last, begin) << "line " << g.index;  // in order, without overlaps
      joined.append(text, last, end - last);
      last = end;
    }
    EXPECT_EQ(joined, text.substr(0, last)) << "line " << g.index;
    EXPECT_EQ(last, text.size()) << "line " << g.index;
  }
  EXPECT_GE(lines, 400);
}

TEST(TokenizerTest, SourceWordsNumberTheWordsOfTheText) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  const Tokenizer& t = model->tokenizer();
  const std::string text = "Y dijo  Dios: Sea la luz.";
  const auto words = t.SourceWords(text);
  const auto ids = t.EncodeSource(text);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(words.size(), ids->size());
  EXPECT_EQ(words.front(), 0);
  EXPECT_EQ(words.back(), -1);  // </s>
  EXPECT_EQ(*std::max_element(words.begin(), words.end()), 5);  // 6 words
  EXPECT_NE(std::find(words.begin(), words.end(), -1), words.end() - 1);  // ':' and '.' are -1
  EXPECT_TRUE(t.SourceWords("\xC3(").empty());
}

TEST(TokenizerTest, SpecialIdsAreSkipped) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(model->tokenizer().DecodeTarget({c.pad_id, c.eos_id, c.unk_id}), "");
}

TEST(TokenizerTest, EmptyTextIsJustEndOfSentence) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  auto ids = model->tokenizer().EncodeSource("");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, std::vector<int>{model->config().eos_id});
}

TEST(TokenizerTest, InvalidUtf8IsRefused) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  auto ids = model->tokenizer().EncodeSource("hola \xC3(");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), ::testing::HasSubstr("UTF-8"));
}

TEST(Utf8Test, Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("año ∑ 😀"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // cut short
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace glossa
