// Recursive parsers (gumbo's HTML tree, the walk over an office document's XML) go as deep as
// the input nests, within a bound: deeper than an HTTP thread's stack has room for (civetweb's
// threads overflowed at 4000 nested HTML tags, and under AddressSanitizer at a handful of XML
// levels). They run on a thread of their own with a stack for the deepest nesting allowed.
#ifndef GLOSSA_SERVER_COMMON_BIG_STACK_H_
#define GLOSSA_SERVER_COMMON_BIG_STACK_H_

#include <cstddef>
#include <functional>

#include "absl/status/status.h"

namespace glossa::server {

// Runs fn on a thread with a stack of `bytes` (reserved, touched only as used), and waits for
// it. RESOURCE_EXHAUSTED if no thread started (fn did not run); INTERNAL, with its message, if
// fn threw (an exception leaving a thread's start function would end the process).
absl::Status RunWithStack(size_t bytes, const std::function<void()>& fn);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_COMMON_BIG_STACK_H_
