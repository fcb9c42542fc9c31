#include "util/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace glossa {
namespace {

bool EnvironmentTunesMalloc() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc") != nullptr) return true;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "MALLOC_", 7) == 0) return true;
  }
  return false;
}

}  // namespace

bool RetainFreedMemory() {
  // A function-local static is initialised once, thread-safely.
  static const bool tuned = [] {
    if (EnvironmentTunesMalloc()) return false;
    // glibc's mallopt returns 1 on success.
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
  }();
  return tuned;
}

}  // namespace glossa
