#include "util/malloc_tuning.h"

#include <malloc.h>

#include <atomic>
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

std::atomic<bool> keep_defaults{false};

}  // namespace

bool ReturnFreedMemory() {
  keep_defaults = true;
  if (EnvironmentTunesMalloc()) return false;
  return mallopt(M_MMAP_THRESHOLD, 128 << 10) == 1;
}

bool RetainFreedMemory() {
  // A function-local static is initialised once, thread-safely.
  static const bool tuned = [] {
    if (keep_defaults || EnvironmentTunesMalloc()) return false;
    // glibc's mallopt returns 1 on success.
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
  }();
  return tuned;
}

}  // namespace glossa
