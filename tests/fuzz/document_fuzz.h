// Shared by the document_<format> fuzz targets: the input is a whole file, read as the format its
// name says (server/documents/document.h). Checks: a refusal is INVALID_ARGUMENT with a message,
// and only of bytes that are not UTF-8 or HTML with too many tags (the other limits are far above
// a fuzz input); an accepted file is written back byte for byte when each segment is its own
// translation; other translations (with spaces, a line break, markup-like characters) are written
// without error as UTF-8 and, in the line formats, add no line and make none blank or not blank;
// a segment is never empty.
#ifndef GLOSSA_TESTS_FUZZ_DOCUMENT_FUZZ_H_
#define GLOSSA_TESTS_FUZZ_DOCUMENT_FUZZ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz_util.h"
#include "server/files/read_document.h"

namespace glossa::fuzz {

struct LineCounts {
  size_t lines = 0, blank = 0;
};

// Lines as '\n' ends them; blank: of spaces, tabs, '\r', '\f' and '\v' only.
inline LineCounts CountLines(absl::string_view text) {
  LineCounts counts;
  bool blank = true;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      ++counts.lines;
      if (blank) ++counts.blank;
      blank = true;
    } else if (absl::string_view(" \t\r\f\v").find(text[i]) == absl::string_view::npos) {
      blank = false;
    }
  }
  return counts;
}

inline int FuzzDocument(const char* file_name, const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto document = glossa::server::ReadDocument(file_name, bytes, {});
  if (!document.ok()) {
    FUZZ_CHECK(document.status().code() == absl::StatusCode::kInvalidArgument,
               "a refusal that is not INVALID_ARGUMENT");
    FUZZ_CHECK(!document.status().message().empty(), "a refusal without a message");
    // HTML also has a limit on its tags.
    FUZZ_CHECK(!ReferenceUtf8Valid(bytes) || absl::StrContains(document.status().message(), "tags"),
               "a UTF-8 file refused");
    return 0;
  }
  FUZZ_CHECK(ReferenceUtf8Valid(bytes), "a file that is not UTF-8 accepted");
  const std::vector<std::string>& texts = (*document)->texts();
  for (const std::string& text : texts) FUZZ_CHECK(!text.empty(), "an empty segment");
  auto same = (*document)->Write(texts);
  FUZZ_CHECK(same.ok() && *same == bytes, "the file is not written back byte for byte");

  std::vector<std::string> translations;
  for (size_t i = 0; i < texts.size(); ++i) {
    translations.push_back(i % 3 == 0 ? "" : i % 3 == 1 ? "a  b\nc <i> \xC3\xA9 " : "x");
  }
  auto other = (*document)->Write(translations);
  FUZZ_CHECK(other.ok() && ReferenceUtf8Valid(*other), "a translated file that is not UTF-8");
  if (!absl::EndsWith(file_name, ".html")) {
    // The line formats' structure: no line added, none made blank or no longer blank.
    const LineCounts before = CountLines(bytes), after = CountLines(*other);
    FUZZ_CHECK(after.lines <= before.lines, "a translation added lines");
    FUZZ_CHECK(after.blank == before.blank, "a translation changed the blank lines");
  }
  return 0;
}

}  // namespace glossa::fuzz

#endif  // GLOSSA_TESTS_FUZZ_DOCUMENT_FUZZ_H_
