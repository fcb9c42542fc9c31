// ParseInlineTags / WriteInlineTags, and tagged texts translated with the demo model
// (Translator::TranslateTagged, engine/tagged_documents.h).
#include "text/inline_tags.h"

#include <string>

#include "common/test_util.h"
#include "engine/translator.h"
#include "gtest/gtest.h"

namespace glossa {
namespace {

TEST(InlineTagsTest, ElementsBecomeSpansOfTheTextWithoutTags) {
  const TaggedText t = ParseInlineTags("Hola <b>mundo <i>cruel</i></b>.<br>Adi&#243;s &amp; <x/>");
  EXPECT_EQ(t.text, "Hola mundo cruel.Adiós & ");
  ASSERT_EQ(t.spans.size(), 4u);
  EXPECT_EQ(t.text.substr(t.spans[0].begin, t.spans[0].end - t.spans[0].begin), "mundo cruel");
  EXPECT_EQ(t.text.substr(t.spans[1].begin, t.spans[1].end - t.spans[1].begin), "cruel");
  EXPECT_TRUE(IsPoint(t.spans[2]));  // <br>: a void element
  EXPECT_TRUE(IsPoint(t.spans[3]));  // <x/>: self-closing
  EXPECT_EQ(t.starts[0], "<b>");
  EXPECT_EQ(t.ends[0], "</b>");
}

TEST(InlineTagsTest, UnmatchedTagsAreKeptAsPoints) {
  const TaggedText t = ParseInlineTags("a </i>b <b>c");
  EXPECT_EQ(t.text, "a b c");
  ASSERT_EQ(t.spans.size(), 2u);
  EXPECT_TRUE(IsPoint(t.spans[0]));
  EXPECT_TRUE(IsPoint(t.spans[1]));
  // Written back where they are placed, each once.
  const std::vector<std::optional<TextSpan>> placed = {TextSpan{2, 2}, TextSpan{4, 4}};
  EXPECT_EQ(WriteInlineTags("A B C", t, placed), "A </i>B <b>C");
}

TEST(InlineTagsTest, TextIsEscapedAndWhatIsNotATagIsText) {
  const TaggedText t = ParseInlineTags("1 < 2 & 3 > 2 &bogus; <b>x</b>");
  EXPECT_EQ(t.text, "1 < 2 & 3 > 2 &bogus; x");
  ASSERT_EQ(t.spans.size(), 1u);
  const std::vector<std::optional<TextSpan>> placed = {TextSpan{4, 5}};
  EXPECT_EQ(WriteInlineTags("a<b&c", t, placed), "a&lt;b&amp;<b>c</b>");
}

// Bytes that are not UTF-8 inside a tag would be written back into the output: such a text is
// refused before its tags are taken out, as is one with too many elements.
TEST(InlineTagsTest, RequestTextsAreUtf8AndWithinTheElementLimit) {
  auto parsed = ParseTaggedTexts({"Hola <b>mundo</b>.", "<a href=\"\xEA]\">x</a> bien"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), "text 1 is not valid UTF-8");
  std::string many;
  for (size_t i = 0; i <= kMaxInlineTags; ++i) many += "<b>x</b>";
  parsed = ParseTaggedTexts({"y", many});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "text 1 has 513 inline tags; the limit is 512: send it in parts");
  parsed = ParseTaggedTexts({"Hola <b>mundo</b> &amp; m\xC3\xA1s.", ""});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].text, "Hola mundo & m\xC3\xA1s.");
  EXPECT_TRUE((*parsed)[1].text.empty());
}

// Every start and end tag of `input` once in `output`, in an order that nests.
void ExpectSameTagsNested(const std::string& input, const std::string& output) {
  const TaggedText in = ParseInlineTags(input), out = ParseInlineTags(output);
  ASSERT_EQ(in.spans.size(), out.spans.size()) << output;
  for (size_t i = 0; i < in.spans.size(); ++i) {
    EXPECT_EQ(IsPoint(in.spans[i]), IsPoint(out.spans[i])) << output;  // still closed in order
  }
}

TEST(TaggedTranslationTest, TagsSurviveSentenceBySentenceTranslation) {
  auto model = testing::DemoModel();
  ASSERT_NE(model, nullptr);
  Translator translator(model);
  TranslateOptions opts;
  opts.beam_size = 1;
  const std::vector<std::string> texts = {
      "<b>Sea la luz. Y fue la luz.</b>",
      "Y Jesús dijo a <b>sus discípulos</b>: <i>Venid</i> conmigo.<br/> Y <a href=\"x\">David</a> "
      "tomó la ciudad.",
      "<x1/>Sea la luz.  <x2/>Y fue la luz.<x3/>",
      "Sin etiquetas. Dos frases."};
  auto tagged = translator.TranslateTagged(texts, opts, /*split_sentences=*/true);
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  std::vector<std::string> plain;
  for (const auto& t : texts) plain.push_back(ParseInlineTags(t).text);
  auto untagged = translator.TranslateDocuments(plain, opts);
  ASSERT_TRUE(untagged.ok()) << untagged.status();
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& out = (*tagged)[i].hypotheses[0].text;
    ExpectSameTagsNested(texts[i], out);
    EXPECT_EQ(ParseInlineTags(out).text, (*untagged)[i].hypotheses[0].text) << out;
    EXPECT_TRUE((*tagged)[i].hypotheses[0].attention.empty());
    EXPECT_TRUE((*tagged)[i].hypotheses[0].alignment.empty());
  }
  // An element over two whole sentences wraps both translations.
  const std::string& both = (*tagged)[0].hypotheses[0].text;
  EXPECT_EQ(both.substr(0, 3), "<b>") << both;
  EXPECT_EQ(both.substr(both.size() - 4), "</b>") << both;
  // Empty elements between sentences keep their place in the whitespace.
  const std::string& points = (*tagged)[2].hypotheses[0].text;
  EXPECT_EQ(points.substr(0, 5), "<x1/>") << points;
  EXPECT_NE(points.find("  <x2/>"), std::string::npos) << points;
  EXPECT_EQ(points.substr(points.size() - 5), "<x3/>") << points;
}

}  // namespace
}  // namespace glossa
