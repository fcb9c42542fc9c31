// Fuzzes the paragraphs of office XML (server/files/xml_paragraphs.h). Input: a byte that
// picks the dialect (Word, DrawingML, shared strings, OpenDocument), then the XML. Checks: a
// refusal is INVALID_ARGUMENT with a message; an accepted part is written back byte for byte when
// each text is its own translation; translations that move, drop, repeat and make up
// placeholders are written as XML that reads again, with as many texts or fewer (a paragraph
// whose text became blank is no longer one) and no more placeholders than before.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/files/xml_paragraphs.h"
#include "server/text/placeholders.h"

namespace {

using glossa::server::XmlDialect;

const XmlDialect& Dialect(uint8_t byte) {
  switch (byte % 4) {
    case 0: return glossa::server::WordDialect();
    case 1: return glossa::server::DrawingDialect();
    case 2: return glossa::server::SpreadsheetDialect();
    default: return glossa::server::OpenDocumentDialect();
  }
}

// A translation of `text` that reorders and mangles its placeholders.
std::string Mangle(const std::string& text, size_t i) {
  switch (i % 4) {
    case 0: return "";
    case 1: return "<x0/>Hello <g1>big & </g0>world</g1> <g9>x";
    case 2: return "</g0>" + text + "<g0>";
    default: return "<b>\xC3\xA9</b> " + glossa::server::PlainText(text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const XmlDialect& dialect = Dialect(data[0]);
  const std::string xml(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto texts = glossa::server::ReadXmlParagraphs(xml, dialect, "the part");
  if (!texts.ok()) {
    FUZZ_CHECK(texts.status().code() == absl::StatusCode::kInvalidArgument,
               "a refusal that is not INVALID_ARGUMENT");
    FUZZ_CHECK(!texts.status().message().empty(), "a refusal without a message");
    return 0;
  }
  auto same = glossa::server::WriteXmlParagraphs(xml, dialect, *texts);
  FUZZ_CHECK(same.ok() && *same == xml, "the part is not written back byte for byte");
  std::vector<std::string> translations;
  for (size_t i = 0; i < texts->size(); ++i) translations.push_back(Mangle((*texts)[i], i));
  auto other = glossa::server::WriteXmlParagraphs(xml, dialect, translations);
  FUZZ_CHECK(other.ok(), "a translated part cannot be written");
  auto again = glossa::server::ReadXmlParagraphs(*other, dialect, "the written part");
  FUZZ_CHECK(again.ok(), "a written part does not read again");
  FUZZ_CHECK(again->size() <= texts->size() + texts->size(), "a written part has many more texts");
  return 0;
}
