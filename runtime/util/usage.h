// --help for Glossa's binaries: the usage message and every flag Glossa defines (Abseil's default
// lists only flags from a source file named after the binary, which matches none of ours).
#ifndef GLOSSA_RUNTIME_UTIL_USAGE_H_
#define GLOSSA_RUNTIME_UTIL_USAGE_H_

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace glossa {

inline void SetUsage(absl::string_view message) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");  // our flags, not Abseil's own
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(message);
}

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_UTIL_USAGE_H_
