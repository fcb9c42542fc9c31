// Fuzzes the office formats' reader (server/files/office.h, archive.h). Input: a byte that
// picks the format (.docx, .pptx, .xlsx, .odt, .odp, .epub), then the file. Checks: a refusal is
// INVALID_ARGUMENT with a message; an accepted file is written back byte for byte when each
// segment is its own translation, and with other translations as a file that reads again as the
// same format.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/files/read_document.h"
#include "server/files/office.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string>& formats = glossa::server::OfficeFormats();
  const std::string name = "input" + formats[data[0] % formats.size()];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto document = glossa::server::ReadDocument(name, bytes, {});
  if (!document.ok()) {
    FUZZ_CHECK(document.status().code() == absl::StatusCode::kInvalidArgument,
               "a refusal that is not INVALID_ARGUMENT");
    FUZZ_CHECK(!document.status().message().empty(), "a refusal without a message");
    return 0;
  }
  const std::vector<std::string>& texts = (*document)->texts();
  auto same = (*document)->Write(texts);
  FUZZ_CHECK(same.ok() && *same == bytes, "the file is not written back byte for byte");
  std::vector<std::string> translations;
  for (size_t i = 0; i < texts.size(); ++i) {
    translations.push_back(i % 2 == 0 ? "Hello <x0/>&amp; <g1>world</g1>" : "");
  }
  auto other = (*document)->Write(translations);
  FUZZ_CHECK(other.ok(), "a translated file cannot be written");
  FUZZ_CHECK(glossa::server::ReadDocument(name, *other, {}).ok(), "a written file does not read");
  return 0;
}
