// The decoding-control flags shared by glossa-translate, glossa-client and glossa-batch
// (--repetition_penalty, --no_repeat_ngram_size, --min_output_tokens, --target_prefix): defined
// once in control_flags.cc, which each of those binaries links.
#ifndef GLOSSA_RUNTIME_CLI_CONTROL_FLAGS_H_
#define GLOSSA_RUNTIME_CLI_CONTROL_FLAGS_H_

#include <string>

namespace glossa {

struct ControlFlags {
  float repetition_penalty = 0.0f;  // 0: off
  int no_repeat_ngram_size = 0;
  int min_output_tokens = 0;
  std::string target_prefix;
};

// The flags' values; `error` is set (and the values are not to be used) when one is out of range.
ControlFlags ControlFlagsValue(std::string* error);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_CLI_CONTROL_FLAGS_H_
