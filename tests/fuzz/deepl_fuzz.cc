// Fuzzes what DeepL's API (server/deepl/) makes of a client's bytes before anything is
// translated: a /v2/translate body as JSON and as form fields (ParseDeeplRequest), and the body
// as tag_handling=xml text (ExtractXmlText). The first input byte picks the content type (bit
// 0), outline_detection (bit 1), ignore_tags "x" (bit 2) and splitting_tags "p" (bit 3); the rest
// is the body. Checks that a refusal is INVALID_ARGUMENT or OUT_OF_RANGE with a message, that an
// accepted request holds what /v2/translate takes, that the runs found lie in order inside the
// XML, and that writing their own placeholders back keeps every byte outside the runs and puts
// back each placeholder's markup (an ignored element's bytes among them).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "markup_marks.h"
#include "server/deepl/deepl_request.h"
#include "server/text/xml_text.h"

namespace {

void CheckRequest(const std::string& content_type, const std::string& body) {
  auto parsed = glossa::server::ParseDeeplRequest(content_type, body, body.substr(0, 16));
  if (!parsed.ok()) {
    const absl::StatusCode code = parsed.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kOutOfRange,
               "a refusal that is neither INVALID_ARGUMENT nor OUT_OF_RANGE");
    FUZZ_CHECK(!parsed.status().message().empty(), "a refusal without a message");
    return;
  }
  FUZZ_CHECK(!parsed->texts.empty(), "a request without text");
  FUZZ_CHECK(parsed->texts.size() <= glossa::server::kMaxDeeplTexts, "too many texts");
  for (const std::string& text : parsed->texts) {
    FUZZ_CHECK(glossa::fuzz::ReferenceUtf8Valid(text), "a text that is not UTF-8");
  }
  FUZZ_CHECK(!parsed->target_lang.empty(), "a request without target_lang");
  const std::string& split = parsed->split_sentences;
  FUZZ_CHECK(split == "0" || split == "1" || split == "nonewlines", "split_sentences");
  const std::string& tags = parsed->tag_handling;
  FUZZ_CHECK(tags.empty() || tags == "xml" || tags == "html", "tag_handling");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  CheckRequest(data[0] % 2 == 0 ? "application/json" : "application/x-www-form-urlencoded", body);

  glossa::server::XmlTextOptions options;
  options.outline_detection = (data[0] & 2) != 0;
  if ((data[0] & 4) != 0) options.ignore_tags = {"x"};
  if ((data[0] & 8) != 0) options.splitting_tags = {"p"};
  const std::string& xml = body;
  auto text = glossa::server::ExtractXmlText(xml, options);
  if (!text.ok()) {
    FUZZ_CHECK(text.status().code() == absl::StatusCode::kInvalidArgument,
               "an XML refusal that is not INVALID_ARGUMENT");
    return 0;
  }
  FUZZ_CHECK(text->texts.size() == text->spans.size(), "a span per text");
  FUZZ_CHECK(text->markup.size() == text->texts.size(), "markup per text");
  size_t last = 0;
  for (const auto& [begin, end] : text->spans) {
    FUZZ_CHECK(last <= begin && begin < end && end <= xml.size(), "spans out of order or bounds");
    last = end;
  }
  // Each run "translated" as a mark and its placeholders in order.
  const glossa::fuzz::Marks runs = glossa::fuzz::MarkRuns(*text);
  const std::vector<std::string>& written = runs.written;
  const std::string replaced = glossa::server::ReplaceHtmlText(xml, *text, runs.marks);
  std::string kept;
  size_t pos = 0;
  for (size_t i = 0; i < text->spans.size(); ++i) {
    const auto [begin, end] = text->spans[i];
    kept += xml.substr(pos, begin - pos) + written[i];
    pos = end;
  }
  kept += xml.substr(pos);
  FUZZ_CHECK(replaced == kept, "ReplaceHtmlText changed bytes outside the runs");
  return 0;
}
