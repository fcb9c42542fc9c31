#include "server/common/status_util.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace glossa::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::string QuoteForMessage(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::StrCat("'", absl::CHexEscape(text), "'");
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, max_bytes)), "...' (", text.size(),
                      " bytes)");
}

}  // namespace glossa::server
