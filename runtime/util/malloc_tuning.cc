#include "util/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

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

void RetainFreedMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (EnvironmentTunesMalloc()) return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
}

}  // namespace glossa
