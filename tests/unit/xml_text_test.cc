// tag_handling=xml's runs (server/text/xml_text.h): where the XML is cut, what each run sends,
// and that writing the runs back keeps the markup.
#include "server/text/xml_text.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

HtmlText Extract(absl::string_view xml, XmlTextOptions options = {}) {
  auto text = ExtractXmlText(xml, options);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *std::move(text) : HtmlText();
}

// Each run written back as its own text: the XML, its entities decoded and & < > escaped.
std::string Roundtrip(absl::string_view xml, const HtmlText& text) {
  return ReplaceHtmlText(xml, text, text.texts);
}

TEST(XmlTextTest, ContainersSplitAndTheirElementsAreSegments) {
  const std::string xml = "<doc>\n  <p>Hola <b>mundo</b>.</p>\n  <p>Adiós.</p>\n</doc>";
  const HtmlText text = Extract(xml);
  EXPECT_THAT(text.texts, ElementsAre("Hola <g0>mundo</g0>.", "Adiós."));
  EXPECT_EQ(Roundtrip(xml, text), xml);
}

TEST(XmlTextTest, SpacesBetweenElementsOnOneLineAreInline) {
  EXPECT_THAT(Extract("<p><b>Hola</b> <i>mundo</i></p>").texts,
              ElementsAre("<g0>Hola</g0> <g1>mundo</g1>"));
  XmlTextOptions options;
  options.outline_detection = false;
  EXPECT_THAT(Extract("<d><p>Uno.</p><p>Dos.</p></d>", options).texts,
              ElementsAre("<g0><g1>Uno.</g1><g2>Dos.</g2></g0>"));
  options.splitting_tags = {"p"};
  EXPECT_THAT(Extract("<d><p>Uno.</p><p>Dos.</p></d>", options).texts,
              ElementsAre("Uno.", "Dos."));
  options.outline_detection = true;
  options.splitting_tags = {"br"};
  options.non_splitting_tags = {"d"};
  EXPECT_THAT(Extract("<d><s>Uno.<br/>Dos.</s></d>", options).texts,
              ElementsAre("Uno.", "Dos."));
}

TEST(XmlTextTest, IgnoredElementsAreKeptWholeAsPoints) {
  XmlTextOptions options;
  options.ignore_tags = {"keep"};
  const std::string xml = "<p>Hola <keep a='>'>no <keep>se</keep> traduce</keep> mundo</p>";
  const HtmlText text = Extract(xml, options);
  EXPECT_THAT(text.texts, ElementsAre("Hola <x0/> mundo"));
  EXPECT_EQ(text.markup[0][0].start, "<keep a='>'>no <keep>se</keep> traduce</keep>");
  EXPECT_EQ(Roundtrip(xml, text), xml);
  // Never closed: the rest of the text is kept (and <p>, its end tag in there, is unclosed).
  EXPECT_THAT(Extract("<p>Hola <keep>mundo cruel</p>", options).texts,
              ElementsAre("<x0/>Hola <x1/>"));
}

TEST(XmlTextTest, CommentsSectionsAndUnmatchedTagsArePoints) {
  const std::string xml = "Hola <!-- x --><![CDATA[<y>]]> </b>mundo <i>cruel";
  const HtmlText text = Extract(xml);
  EXPECT_THAT(text.texts, ElementsAre("Hola <x0/><x1/> <x2/>mundo <x3/>cruel"));
  EXPECT_EQ(Roundtrip(xml, text), xml);
}

TEST(XmlTextTest, EntitiesAreDecodedAndWrittenBackEscaped) {
  const HtmlText text =
      Extract("<p>a &amp; b &lt; c &#233;&#xE9; &quot;d&quot; &nope; &#xD800;</p>");
  EXPECT_THAT(text.texts, ElementsAre("a &amp; b &lt; c éé \"d\" &amp;nope; &amp;#xD800;"));
}

TEST(XmlTextTest, DeepNestingAndTooManyElements) {
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "<a>";
  deep += "Hola.";
  for (int i = 0; i < 1000; ++i) deep += "</a>";
  EXPECT_THAT(Extract(deep).texts, ElementsAre("Hola."));
  XmlTextOptions flat;
  flat.outline_detection = false;
  const HtmlText text = Extract(deep, flat);  // 1000 elements in one run: its text alone
  EXPECT_THAT(text.texts, ElementsAre("Hola."));
  EXPECT_EQ(Roundtrip(deep, text), deep);
}

TEST(XmlTextTest, Refusals) {
  EXPECT_THAT(ExtractXmlText("Hola <b mundo", {}).status().message(), HasSubstr("not closed"));
  EXPECT_THAT(ExtractXmlText("Hola <!-- mundo", {}).status().message(), HasSubstr("not closed"));
  EXPECT_THAT(ExtractXmlText("\xff", {}).status().message(), HasSubstr("UTF-8"));
  std::string many;
  for (int i = 0; i < 10001; ++i) many += "<b/>";
  EXPECT_THAT(ExtractXmlText(many, {}).status().message(), HasSubstr("10000"));
  // A '<' that starts no tag is text.
  EXPECT_THAT(Extract("1 < 2 y 3 <= 4").texts, ElementsAre("1 &lt; 2 y 3 &lt;= 4"));
}

}  // namespace
}  // namespace glossa::server
