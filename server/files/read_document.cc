#include "server/files/read_document.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/files/office.h"

namespace glossa::server {

std::vector<std::string> SupportedDocumentFormats() {
  std::vector<std::string> out = TextDocumentFormats();
  for (const std::string& extension : OfficeFormats()) out.push_back(extension);
  return out;
}

absl::StatusOr<std::unique_ptr<Document>> ReadDocument(absl::string_view file_name,
                                                       std::string bytes,
                                                       const DocumentLimits& limits) {
  const std::string extension = DocumentExtension(file_name);
  const std::vector<std::string> formats = SupportedDocumentFormats();
  const std::string list = absl::StrJoin(formats, ", ");
  if (extension == ".pdf") {
    return absl::InvalidArgumentError(
        absl::StrCat("PDF is not supported; supported formats: ", list));
  }
  if (std::find(formats.begin(), formats.end(), extension) == formats.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported file format ", extension.empty() ? "(no extension)" : extension,
                     " in \"", file_name, "\"; supported formats: ", list));
  }
  const std::vector<std::string>& office = OfficeFormats();
  if (std::find(office.begin(), office.end(), extension) == office.end()) {
    return ReadTextDocument(file_name, std::move(bytes), limits);
  }
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the file has ", bytes.size(),
                                                   " bytes, more than the limit of ",
                                                   limits.max_bytes, ": send it in parts"));
  }
  return ReadOfficeDocument(extension, std::move(bytes), limits);
}

}  // namespace glossa::server
