// The one place where runtime errors (absl::Status) become gRPC statuses. Abseil's codes are
// gRPC's codes, so the mapping keeps the code and the message.
#ifndef GLOSSA_SERVER_COMMON_STATUS_UTIL_H_
#define GLOSSA_SERVER_COMMON_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Client-supplied text (a model or method name) as an error message quotes it: in single quotes,
// C-escaped (it may hold any bytes) and cut to max_bytes with its full size added, so that a
// huge name cannot make the status trailer exceed the client's metadata limit.
std::string QuoteForMessage(absl::string_view text, size_t max_bytes = 64);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_COMMON_STATUS_UTIL_H_
