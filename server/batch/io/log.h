// One line to stderr at a time, from any thread: progress, retries and failed lines.
#ifndef GLOSSA_SERVER_BATCH_IO_LOG_H_
#define GLOSSA_SERVER_BATCH_IO_LOG_H_

#include <iostream>
#include <mutex>

#include "absl/strings/string_view.h"

namespace glossa::batch {

inline void Log(absl::string_view message) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "glossa-batch: " << message << "\n" << std::flush;
}

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_IO_LOG_H_
