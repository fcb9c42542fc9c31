// multipart/form-data (RFC 7578), strictly: the boundary from the Content-Type header, parts
// separated by CRLF "--" boundary lines, each with headers (Content-Disposition: form-data;
// name="..."; filename="...", optionally Content-Type), the last boundary followed by "--".
// Anything else (no boundary, a part without a name, a missing final boundary, header lines
// without a colon) is INVALID_ARGUMENT, so that a malformed upload is refused rather than guessed.
#ifndef GLOSSA_SERVER_FILE_API_MULTIPART_H_
#define GLOSSA_SERVER_FILE_API_MULTIPART_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct FormPart {
  std::string name;
  std::string file_name;  // the filename parameter; empty for a field that is not a file
  bool has_file_name = false;
  std::string content_type;  // as sent (empty when the part has none)
  absl::string_view data;    // into the body given to ParseMultipart
};

// The boundary parameter of a multipart/form-data Content-Type; INVALID_ARGUMENT when the media
// type is another or the boundary is missing or longer than RFC 2046's 70 characters.
absl::StatusOr<std::string> MultipartBoundary(absl::string_view content_type);

// The parts of `body` (which must outlive them), at most `max_parts`.
absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view content_type,
                                                     absl::string_view body, int max_parts = 64);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_FILE_API_MULTIPART_H_
