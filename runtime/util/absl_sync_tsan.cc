// ThreadSanitizer builds only (GLOSSA_SANITIZE=thread, see runtime/CMakeLists.txt).
//
// Debian's Abseil is a shared library built without TSan, so TSan cannot see that absl::Mutex,
// CondVar and Notification order memory: every access guarded by an absl::Mutex was reported as
// a race. This file defines the Abseil functions Glossa calls, in the executable, where they
// take precedence over the shared library's: each calls the library's own function (found with
// dlsym(RTLD_NEXT)) and tells TSan what it did: __tsan_release before a lock is given up (or a
// notification sent), __tsan_acquire after one is taken (or a notification seen).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

#define GLOSSA_STR2(x) #x
#define GLOSSA_STR(x) GLOSSA_STR2(x)

// The library's definition of the function whose mangled name, after the inline namespace
// "_ZN4absl<len><ns>" (or "_ZNK4absl..." for const members), is `rest`.
void* Real(const char* prefix, const char* rest) {
  const std::string ns = GLOSSA_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(prefix) + "4absl" + std::to_string(ns.size()) + ns + rest;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan: %s not found\n", name.c_str());
    std::abort();
  }
  return f;
}

template <typename F>
F RealFn(const char* prefix, const char* rest) {
  return reinterpret_cast<F>(Real(prefix, rest));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = RealFn<void (*)(Mutex*)>("_ZN", "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = RealFn<void (*)(Mutex*)>("_ZN", "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = RealFn<bool (*)(Mutex*)>("_ZN", "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = RealFn<void (*)(Mutex*)>("_ZN", "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static auto real = RealFn<void (*)(Mutex*)>("_ZN", "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void CondVar::Wait(Mutex* mu) {
  static auto real = RealFn<void (*)(CondVar*, Mutex*)>("_ZN", "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, Duration)>(
      "_ZN", "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, Time)>(
      "_ZN", "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  static auto real = RealFn<void (*)(Notification*)>("_ZN", "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real =
      RealFn<void (*)(const Notification*)>("_ZNK", "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static auto real = RealFn<bool (*)(const Notification*, Duration)>(
      "_ZNK", "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// TSan also sees the memory accesses of uninstrumented libraries where it intercepts them
// (memcpy, memmove, ...) but not their synchronisation: gRPC's and Abseil's own internals then
// look racy (e.g. GraphCycles::GetId's memmove under Abseil's internal spin lock). Those reports
// are about code Glossa does not own and TSan cannot judge, so interceptors called from these
// libraries are not reported. Glossa's own code stays fully checked, and so are races in which
// one side is Glossa's code (those accesses are instrumented).
extern "C" const char* __tsan_default_suppressions() {
  // Each name must match one loaded library exactly (TSan refuses a name matching two).
  return
      "called_from_lib:libabsl_base.so\n"
      "called_from_lib:libabsl_city.so\n"
      "called_from_lib:libabsl_cord.so\n"
      "called_from_lib:libabsl_cord_internal.so\n"
      "called_from_lib:libabsl_cordz_functions.so\n"
      "called_from_lib:libabsl_cordz_handle.so\n"
      "called_from_lib:libabsl_cordz_info.so\n"
      "called_from_lib:libabsl_debugging_internal.so\n"
      "called_from_lib:libabsl_demangle_internal.so\n"
      "called_from_lib:libabsl_exponential_biased.so\n"
      "called_from_lib:libabsl_graphcycles_internal.so\n"
      "called_from_lib:libabsl_hash.so\n"
      "called_from_lib:libabsl_hashtablez_sampler.so\n"
      "called_from_lib:libabsl_int128.so\n"
      "called_from_lib:libabsl_low_level_hash.so\n"
      "called_from_lib:libabsl_malloc_internal.so\n"
      "called_from_lib:libabsl_raw_hash_set.so\n"
      "called_from_lib:libabsl_raw_logging_internal.so\n"
      "called_from_lib:libabsl_spinlock_wait.so\n"
      "called_from_lib:libabsl_stacktrace.so\n"
      "called_from_lib:libabsl_status.so\n"
      "called_from_lib:libabsl_statusor.so\n"
      "called_from_lib:libabsl_str_format_internal.so\n"
      "called_from_lib:libabsl_strerror.so\n"
      "called_from_lib:libabsl_strings.so\n"
      "called_from_lib:libabsl_strings_internal.so\n"
      "called_from_lib:libabsl_symbolize.so\n"
      "called_from_lib:libabsl_synchronization.so\n"
      "called_from_lib:libabsl_throw_delegate.so\n"
      "called_from_lib:libabsl_time.so\n"
      "called_from_lib:libabsl_time_zone.so\n"
      "called_from_lib:libgrpc.so\n"
      "called_from_lib:libgrpc++.so\n"
      "called_from_lib:libgrpc++_reflection.so\n"
      "called_from_lib:libgpr.so\n"
      "called_from_lib:libupb.so\n"
      "called_from_lib:libprotobuf.so\n"
      "called_from_lib:libdnnl.so\n"
      "called_from_lib:libgomp.so\n"
      "called_from_lib:libcares.so\n"
      "called_from_lib:libcivetweb.so\n"
      "called_from_lib:libcivetweb-cpp.so\n"
      "called_from_lib:libprometheus-cpp-core.so\n"
      "called_from_lib:libprometheus-cpp-pull.so\n"
      "called_from_lib:libssl.so\n"
      "called_from_lib:libcrypto.so\n"
      "called_from_lib:libre2.so\n"
      // gRPC's C++ API is inline code (instrumented) whose calls are handed between threads by
      // gRPC's core (not instrumented): every call's ops look racy. This hides any report with
      // a frame in those headers, including ones where Glossa's reactors are on the stack.
      "race:/usr/include/grpcpp/\n"
      // Reports with a frame in these libraries (e.g. memory they free with operator delete,
      // which called_from_lib does not cover): their synchronisation is invisible too.
      "race:libgrpc.so\n"
      "race:libgrpc++.so\n"
      "race:libgpr.so\n"
      "race:libcrypto.so\n"
      "race:libssl.so\n"
      "race:libprometheus-cpp-core.so\n"
      "race:libprometheus-cpp-pull.so\n"
      "race:libcivetweb\n"
      // prometheus::Exposer::RegisterCollectable unlocks a std::mutex whose lock TSan did not
      // see (both inside libprometheus-cpp-pull): "unlock of an unlocked mutex".
      "mutex:glossa::server::MetricsServer::Start\n";
}
