// Office documents: zip archives (server/files/archive.h), the paragraphs of their XML
// (xml_paragraphs.h) and the formats (office.h), with hand-made files.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/files/archive.h"
#include "server/files/read_document.h"
#include "server/files/xml_paragraphs.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Write(absl::string_view xml, const XmlDialect& dialect,
                  const std::vector<std::string>& translations) {
  auto out = WriteXmlParagraphs(xml, dialect, translations);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

std::vector<std::string> Read(absl::string_view xml, const XmlDialect& dialect) {
  auto texts = ReadXmlParagraphs(xml, dialect, "the part");
  EXPECT_TRUE(texts.ok()) << texts.status();
  return texts.ok() ? *texts : std::vector<std::string>{};
}

constexpr absl::string_view kWord =
    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
    "<w:document xmlns:w=\"w\"><w:body>"
    "<w:p><w:pPr><w:jc w:val=\"center\"/></w:pPr>"
    "<w:r><w:t xml:space=\"preserve\">Vi la </w:t></w:r><w:proofErr/>"
    "<w:r><w:rPr><w:b/></w:rPr><w:t>casa</w:t></w:r>"
    "<w:r w:rsidR=\"1\"><w:rPr><w:b/></w:rPr><w:t xml:space=\"preserve\"> roja</w:t></w:r>"
    "<w:r><w:t xml:space=\"preserve\"> y el </w:t></w:r>"
    "<w:hyperlink r:id=\"rId5\"><w:r><w:t>r&#237;o</w:t></w:r></w:hyperlink>"
    "<w:r><w:tab/><w:t>&amp; fin.</w:t></w:r></w:p>"
    "<w:p><w:r><w:t>1.</w:t></w:r></w:p>"
    "<w:p><w:ins w:id=\"1\"><w:r><w:t>Nuevo</w:t></w:r></w:ins><w:r><w:t> texto</w:t></w:r></w:p>"
    "</w:body></w:document>";

TEST(XmlParagraphsTest, WordRunsArePlaceholdersAroundTheirFormatting) {
  // A paragraph without a letter is not a text; one with tracked changes goes node by node.
  EXPECT_THAT(
      Read(kWord, WordDialect()),
      ElementsAre("Vi la <g0>casa roja</g0> y el <g1>río</g1><x2/>&amp; fin.", "Nuevo", " texto"));
}

TEST(XmlParagraphsTest, WordRunsAreWrittenBackWithTheirProperties) {
  const std::string out =
      Write(kWord, WordDialect(),
            {"I saw the <g0>red house</g0> <x2/>&amp; <g1>river</g1>.", "New", " text"});
  EXPECT_THAT(out, HasSubstr("<w:p><w:pPr><w:jc w:val=\"center\"/></w:pPr>"
                             "<w:r><w:t xml:space=\"preserve\">I saw the </w:t></w:r>"
                             "<w:r><w:rPr><w:b/></w:rPr><w:t xml:space=\"preserve\">red house"
                             "</w:t></w:r><w:r><w:t xml:space=\"preserve\"> </w:t></w:r>"
                             "<w:r><w:tab/></w:r><w:r><w:t xml:space=\"preserve\">&amp; </w:t>"
                             "</w:r><w:hyperlink r:id=\"rId5\"><w:r><w:t xml:space=\"preserve\">"
                             "river</w:t></w:r></w:hyperlink><w:r><w:t xml:space=\"preserve\">."
                             "</w:t></w:r></w:p>"));
  EXPECT_THAT(out, HasSubstr("<w:ins w:id=\"1\"><w:r><w:t>New</w:t></w:r></w:ins>"));
  EXPECT_TRUE(
      absl::StartsWith(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>"));
  // Untouched: the part comes back byte for byte.
  EXPECT_EQ(Write(kWord, WordDialect(), Read(kWord, WordDialect())), kWord);
}

TEST(XmlParagraphsTest, PowerPointKeepsTheParagraphsEndPropertiesLast) {
  constexpr absl::string_view kSlide =
      "<p:sld><a:p><a:r><a:rPr lang=\"es\"/><a:t>Hola </a:t></a:r><a:r><a:rPr lang=\"es\" i=\"1\"/>"
      "<a:t>mundo</a:t></a:r><a:br/><a:r><a:rPr lang=\"es\"/><a:t>adiós</a:t></a:r>"
      "<a:endParaRPr lang=\"es\"/></a:p></p:sld>";
  EXPECT_THAT(Read(kSlide, DrawingDialect()), ElementsAre("Hola <g0>mundo</g0><x1/>adiós"));
  EXPECT_EQ(Write(kSlide, DrawingDialect(), {"<g0>World</g0> hello<x1/>bye"}),
            "<p:sld><a:p><a:r><a:rPr lang=\"es\" i=\"1\"/><a:t>World</a:t></a:r><a:r><a:rPr "
            "lang=\"es\"/><a:t> hello</a:t></a:r><a:br/><a:r><a:rPr lang=\"es\"/><a:t>bye</a:t>"
            "</a:r><a:endParaRPr lang=\"es\"/></a:p></p:sld>");
}

TEST(XmlParagraphsTest, SharedStringsPlainAndRich) {
  constexpr absl::string_view kStrings =
      "<sst><si><t>Uno</t></si><si><r><t>Dos </t></r><r><rPr><b/></rPr><t>tres</t></r></si>"
      "<si><t>42</t></si></sst>";
  EXPECT_THAT(Read(kStrings, SpreadsheetDialect()), ElementsAre("Uno", "Dos <g0>tres</g0>"));
  EXPECT_EQ(Write(kStrings, SpreadsheetDialect(), {"One", "Two <g0>three</g0>"}),
            "<sst><si><t xml:space=\"preserve\">One</t></si><si><r><t xml:space=\"preserve\">Two "
            "</t></r><r><rPr><b/></rPr><t xml:space=\"preserve\">three</t></r></si><si><t>42</t>"
            "</si></sst>");
}

TEST(XmlParagraphsTest, OpenDocumentSpansLinksAndSpaces) {
  constexpr absl::string_view kContent =
      "<office:text><text:h text:outline-level=\"1\">Título</text:h>"
      "<text:p text:style-name=\"P1\">Vi<text:s text:c=\"2\"/>la <text:span text:style-name=\"T1\">"
      "casa</text:span> y <text:a xlink:href=\"http://x/?a=1&amp;b=2\">el río</text:a>."
      "<text:line-break/></text:p>"
      "<text:p>Nota<text:note><text:note-body><text:p>Abajo</text:p></text:note-body></text:note>"
      "</text:p></office:text>";
  EXPECT_THAT(
      Read(kContent, OpenDocumentDialect()),
      ElementsAre("Título", "Vi  la <g0>casa</g0> y <g1>el río</g1>.<x2/>", "Nota", "Abajo"));
  EXPECT_EQ(
      Write(kContent, OpenDocumentDialect(),
            {"Title", "I saw the <g0>house</g0> &amp; <g1>river</g1>.<x2/>", "Note", "Below"}),
      "<office:text><text:h text:outline-level=\"1\">Title</text:h><text:p "
      "text:style-name=\"P1\">I saw the <text:span text:style-name=\"T1\">house</text:span> "
      "&amp; <text:a xlink:href=\"http://x/?a=1&amp;b=2\">river</text:a>.<text:line-break/>"
      "</text:p><text:p>Note<text:note><text:note-body><text:p>Below</text:p></text:note-body>"
      "</text:note></text:p></office:text>");
}

TEST(XmlParagraphsTest, OpenDocumentSpansOnlyKeepTheirMostUsedStyleAsTheBase) {
  // As LibreOffice writes a Word paragraph whose other runs say "not bold" (T1) around a bold
  // word (T2): T1 is the base, T2 the element placed.
  constexpr absl::string_view kContent =
      "<text:p text:style-name=\"Standard\"><text:span text:style-name=\"T1\">El sol sobre la "
      "</text:span><text:span text:style-name=\"T2\">tierra,</text:span><text:span "
      "text:style-name=\"T1\"> cuando Lot llegó.</text:span></text:p>";
  EXPECT_THAT(Read(kContent, OpenDocumentDialect()),
              ElementsAre("El sol sobre la <g0>tierra,</g0> cuando Lot llegó."));
  EXPECT_EQ(Write(kContent, OpenDocumentDialect(), {"The sun on the <g0>land</g0>, when Lot came."}),
            "<text:p text:style-name=\"Standard\"><text:span text:style-name=\"T1\">The sun on "
            "the </text:span><text:span text:style-name=\"T2\">land</text:span><text:span "
            "text:style-name=\"T1\">, when Lot came.</text:span></text:p>");
}

TEST(XmlParagraphsTest, InlineStringsOfASheet) {
  constexpr absl::string_view kSheet =
      "<sheetData><row><c r=\"A1\" t=\"inlineStr\"><is><t>Hola</t></is></c><c r=\"B1\"><f>A2*2</f>"
      "<v>4</v></c></row></sheetData>";
  EXPECT_THAT(Read(kSheet, SpreadsheetDialect()), ElementsAre("Hola"));
  EXPECT_EQ(Write(kSheet, SpreadsheetDialect(), {"Hello"}),
            "<sheetData><row><c r=\"A1\" t=\"inlineStr\"><is><t xml:space=\"preserve\">Hello</t>"
            "</is></c><c r=\"B1\"><f>A2*2</f><v>4</v></c></row></sheetData>");
}

TEST(XmlParagraphsTest, ADtdIsRefusedAndNeverExpanded) {
  constexpr absl::string_view kLaughs =
      "<?xml version=\"1.0\"?><!DOCTYPE w [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>"
      "<w:document><w:p><w:r><w:t>Hola &b;</w:t></w:r></w:p></w:document>";
  auto texts = ReadXmlParagraphs(kLaughs, WordDialect(), "word/document.xml");
  ASSERT_FALSE(texts.ok());
  EXPECT_THAT(texts.status().message(), HasSubstr("word/document.xml declares a DTD"));
}

TEST(XmlParagraphsTest, BadXmlIsAClearError) {
  auto texts = ReadXmlParagraphs("<w:p><w:r>", WordDialect(), "word/document.xml");
  ASSERT_FALSE(texts.ok());
  EXPECT_EQ(texts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(texts.status().message(), HasSubstr("word/document.xml is not well-formed XML"));
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "<a>";
  for (int i = 0; i < 300; ++i) deep += "</a>";
  texts = ReadXmlParagraphs(deep, WordDialect(), "x");
  ASSERT_FALSE(texts.ok());
  EXPECT_THAT(texts.status().message(), HasSubstr("deeper than 256"));
}

// --- archives and formats -------------------------------------------------------------------

std::string Docx(absl::string_view document_xml) {
  auto zip = WriteArchive({{"[Content_Types].xml", "<Types/>", false},
                           {"word/document.xml", std::string(document_xml), false},
                           {"word/media/image1.png", std::string(3000, '\x89'), true}});
  EXPECT_TRUE(zip.ok()) << zip.status();
  return zip.ok() ? *zip : "";
}

TEST(OfficeTest, ADocxIsTranslatedAndEveryOtherEntryKept) {
  const std::string file = Docx(kWord);
  auto document = ReadDocument("carta.DOCX", file, {});
  ASSERT_TRUE(document.ok()) << document.status();
  EXPECT_TRUE((*document)->inline_tags());
  ASSERT_EQ((*document)->texts().size(), 3u);
  auto same = (*document)->Write((*document)->texts());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, file);
  auto written = (*document)->Write({"I saw <g0>it</g0><g1>x</g1><x2/>", "New", " text"});
  ASSERT_TRUE(written.ok()) << written.status();
  auto entries = ReadArchive(*written, "the result");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "[Content_Types].xml");
  EXPECT_THAT((*entries)[1].data, HasSubstr("I saw "));
  EXPECT_EQ((*entries)[2].data, std::string(3000, '\x89'));
  EXPECT_TRUE((*entries)[2].stored);
}

TEST(OfficeTest, FilesThatAreNotWhatTheirNameSaysAreRefusedClearly) {
  const std::pair<std::string, std::string> kBad[] = {
      {"a.docx", "Hola, no soy un zip"},
      {"a.docx", Docx(kWord).substr(0, 200)},
      {"a.pptx", Docx(kWord)},
      {"a.docx", Docx("<w:document><w:p>")},
  };
  const char* kWhy[] = {"not a zip archive", "not a zip archive", "has no ppt/presentation.xml",
                        "not well-formed XML"};
  for (size_t i = 0; i < std::size(kBad); ++i) {
    auto document = ReadDocument(kBad[i].first, kBad[i].second, {});
    ASSERT_FALSE(document.ok()) << i;
    EXPECT_EQ(document.status().code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_THAT(document.status().message(), HasSubstr(kWhy[i])) << i;
  }
}

TEST(OfficeTest, ZipBombsAndHugeArchivesAreRefusedBeforeInflating) {
  auto bomb = WriteArchive({{"word/document.xml", std::string(64 << 20, ' '), false}});
  ASSERT_TRUE(bomb.ok());
  EXPECT_LT(bomb->size(), 1u << 20);
  auto document = ReadDocument("a.docx", *bomb, {});
  ASSERT_FALSE(document.ok());
  EXPECT_THAT(document.status().message(), HasSubstr("zip bomb"));
  // Entries each too small for their own ratio to count, together a thousandfold.
  std::vector<ArchiveEntry> small;
  for (int i = 0; i < 255; ++i) {
    small.push_back({absl::StrCat("word/media/zero", i, ".bin"), std::string(60 << 10, '\0'),
                     false});
  }
  small.push_back({"word/document.xml", std::string(kWord), false});
  auto spread = WriteArchive(small);
  ASSERT_TRUE(spread.ok());
  auto spread_document = ReadDocument("a.docx", *spread, {});
  ASSERT_FALSE(spread_document.ok());
  EXPECT_THAT(spread_document.status().message(), HasSubstr("refused as a zip bomb"));
  ArchiveLimits limits;
  limits.max_entries = 2;
  auto many = ReadArchive(Docx(kWord), "the .docx file", limits);
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(many.status().message(), HasSubstr("has 3 entries; the limit is 2"));
}

}  // namespace
}  // namespace glossa::server
