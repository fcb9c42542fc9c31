// Fuzzes what the HTTP API makes of a client's bytes before anything is translated: the body of
// LibreTranslate's /translate and /detect as JSON and as form fields (ParseLibreRequest), and
// format=html (ExtractHtmlText, ReplaceHtmlText). The first input byte picks the content type;
// the rest is the body. Checks that a refusal is INVALID_ARGUMENT with a message, that the text
// nodes found lie in order inside the HTML, and that writing their own text back keeps every
// byte outside them.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "markup_marks.h"
#include "server/text/html_text.h"
#include "server/http_api/libretranslate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  glossa::server::HttpRequest request;
  request.method = "POST";
  request.path = "/translate";
  request.content_type =
      data[0] % 2 == 0 ? "application/json; charset=utf-8" : "application/x-www-form-urlencoded";
  request.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  request.query = request.body.substr(0, request.body.size() / 4);

  auto parsed = glossa::server::ParseLibreRequest(request);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument,
               "a refusal that is not INVALID_ARGUMENT");
    FUZZ_CHECK(!parsed.status().message().empty(), "a refusal without a message");
  } else {
    FUZZ_CHECK(parsed->alternatives >= 0 && parsed->alternatives <= 64,
               "alternatives out of range");
    FUZZ_CHECK(parsed->batch || parsed->q.size() <= 1, "several q without an array");
  }

  // The body as HTML.
  const std::string& html = request.body;
  auto text = glossa::server::ExtractHtmlText(html);
  if (!text.ok()) {
    FUZZ_CHECK(text.status().code() == absl::StatusCode::kInvalidArgument,
               "an HTML refusal that is not INVALID_ARGUMENT");
    return 0;
  }
  FUZZ_CHECK(text->texts.size() == text->spans.size(), "a span per text");
  size_t last = 0;
  for (const auto& [begin, end] : text->spans) {
    FUZZ_CHECK(last <= begin && begin < end && end <= html.size(), "spans out of order or bounds");
    last = end;
  }
  // Each run "translated" as a mark and its placeholders in order: the markup they stand for
  // comes back in their place, and every byte outside the runs as it was.
  FUZZ_CHECK(text->markup.size() == text->texts.size(), "markup per text");
  const glossa::fuzz::Marks runs = glossa::fuzz::MarkRuns(*text);
  const std::vector<std::string>& written = runs.written;
  const std::string replaced = glossa::server::ReplaceHtmlText(html, *text, runs.marks);
  std::string kept;  // the HTML outside the runs, as it was
  size_t pos = 0;
  for (size_t i = 0; i < text->spans.size(); ++i) {
    const auto [begin, end] = text->spans[i];
    kept += html.substr(pos, begin - pos) + written[i];
    pos = end;
  }
  kept += html.substr(pos);
  FUZZ_CHECK(replaced == kept, "ReplaceHtmlText changed bytes outside the runs");
  return 0;
}
