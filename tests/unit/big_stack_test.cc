// RunWithStack: fn runs on a thread with a large stack; what it throws becomes a status.
#include "server/common/big_stack.h"

#include <pthread.h>

#include <new>
#include <stdexcept>

#include <gtest/gtest.h>

namespace glossa::server {
namespace {

size_t StackSizeOfThisThread() {
  pthread_attr_t attr;
  size_t bytes = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  pthread_attr_getstacksize(&attr, &bytes);
  pthread_attr_destroy(&attr);
  return bytes;
}

TEST(BigStackTest, RunsFnOnAThreadWithTheStackAsked) {
  size_t bytes = 0;
  EXPECT_TRUE(RunWithStack(size_t{64} << 20, [&] { bytes = StackSizeOfThisThread(); }).ok());
  EXPECT_GE(bytes, size_t{64} << 20);
}

TEST(BigStackTest, AnExceptionBecomesAnInternalErrorNotTheEndOfTheProcess) {
  const absl::Status thrown =
      RunWithStack(size_t{1} << 20, [] { throw std::runtime_error("the parser gave up"); });
  EXPECT_EQ(thrown.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(thrown.message(), "failed: the parser gave up");
  const absl::Status oom = RunWithStack(size_t{1} << 20, [] { throw std::bad_alloc(); });
  EXPECT_EQ(oom.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(oom.message(), "failed: out of memory");
  EXPECT_EQ(RunWithStack(size_t{1} << 20, [] { throw 42; }).message(), "failed: an exception");
}

}  // namespace
}  // namespace glossa::server
