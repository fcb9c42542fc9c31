// The one place where runtime errors (absl::Status) become gRPC statuses. Abseil's codes are
// gRPC's codes, so the mapping keeps the code and the message.
#ifndef GLOSSA_SERVER_STATUS_UTIL_H_
#define GLOSSA_SERVER_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace glossa::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_STATUS_UTIL_H_
