// Status macros: Debian's Abseil 20220623 has no ABSL_RETURN_IF_ERROR.
#ifndef GLOSSA_RUNTIME_UTIL_STATUS_MACROS_H_
#define GLOSSA_RUNTIME_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GLOSSA_CONCAT_INNER(a, b) a##b
#define GLOSSA_CONCAT(a, b) GLOSSA_CONCAT_INNER(a, b)

#define GLOSSA_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status glossa_status_ = (expr);          \
    if (!glossa_status_.ok()) return glossa_status_; \
  } while (0)

#define GLOSSA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#define GLOSSA_ASSIGN_OR_RETURN(lhs, expr) \
  GLOSSA_ASSIGN_OR_RETURN_IMPL(GLOSSA_CONCAT(glossa_statusor_, __LINE__), lhs, expr)

#endif  // GLOSSA_RUNTIME_UTIL_STATUS_MACROS_H_
