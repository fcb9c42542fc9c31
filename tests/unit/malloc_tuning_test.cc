// util/malloc_tuning.h: after RetainFreedMemory, a freed buffer of a few MB stays with the process
// and the next one of that size is served from it without page faults. With glibc's defaults the
// first such buffer is mapped and unmapped (above the 128 KB mmap threshold), so touching the
// second faults every page in again: this test fails there.
#include "util/malloc_tuning.h"

#include <malloc.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace glossa {
namespace {

// Keeps the compiler from dropping a buffer that is written and freed unread (GCC removes such
// malloc/memset/free triples, and the test would then measure nothing).
void Keep(char* p) { asm volatile("" : : "r"(p) : "memory"); }

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

TEST(MallocTuningTest, AFreedBufferIsReusedWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer build: its allocator replaces glibc malloc, which mallopt tunes";
#endif
  if (!RetainFreedMemory()) {
    GTEST_SKIP() << "GLIBC_TUNABLES names glibc.malloc or a MALLOC_* variable is set: "
                    "RetainFreedMemory leaves malloc alone";
  }
  ASSERT_TRUE(RetainFreedMemory());  // idempotent
  constexpr size_t kBytes = size_t{4} << 20;  // 1,024 pages
  char* first = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(first, nullptr);
  std::memset(first, 1, kBytes);
  Keep(first);
  std::free(first);
  EXPECT_GE(mallinfo2().fordblks, kBytes) << "the freed buffer went back to the kernel";

  const int64_t before = MinorFaults();
  char* second = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(second, nullptr);
  std::memset(second, 2, kBytes);
  Keep(second);
  const int64_t faults = MinorFaults() - before;
  std::free(second);
  EXPECT_LT(faults, 64) << "touching a reused 4 MB buffer faulted " << faults << " pages in";
}

}  // namespace
}  // namespace glossa
