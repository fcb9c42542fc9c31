#include "server/common/big_stack.h"

#include <pthread.h>

#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

struct Call {
  const std::function<void()>* fn;
  std::string failure;  // what fn threw; empty if it returned
};

void* Run(void* argument) {
  Call* call = static_cast<Call*>(argument);
  try {
    (*call->fn)();
  } catch (const std::bad_alloc&) {
    call->failure = "out of memory";
  } catch (const std::exception& e) {
    call->failure = e.what()[0] != '\0' ? e.what() : "an exception";
  } catch (...) {
    call->failure = "an exception";
  }
  return nullptr;
}

}  // namespace

absl::Status RunWithStack(size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    return absl::ResourceExhaustedError("no thread to run on: try again later");
  }
  Call call{&fn, ""};
  pthread_t thread;
  const bool started = pthread_attr_setstacksize(&attr, bytes) == 0 &&
                       pthread_create(&thread, &attr, Run, &call) == 0;
  pthread_attr_destroy(&attr);
  if (!started) return absl::ResourceExhaustedError("no thread to run on: try again later");
  pthread_join(thread, nullptr);
  if (!call.failure.empty()) return absl::InternalError(absl::StrCat("failed: ", call.failure));
  return absl::OkStatus();
}

}  // namespace glossa::server
