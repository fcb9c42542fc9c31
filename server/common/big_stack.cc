#include "server/common/big_stack.h"

#include <pthread.h>

namespace glossa::server {

bool RunWithStack(size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_t thread;
  const bool started = pthread_attr_setstacksize(&attr, bytes) == 0 &&
                       pthread_create(
                           &thread, &attr,
                           [](void* f) -> void* {
                             (*static_cast<const std::function<void()>*>(f))();
                             return nullptr;
                           },
                           const_cast<std::function<void()>*>(&fn)) == 0;
  pthread_attr_destroy(&attr);
  if (started) pthread_join(thread, nullptr);
  return started;
}

}  // namespace glossa::server
