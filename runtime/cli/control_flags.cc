#include "cli/control_flags.h"

#include <cmath>

#include "absl/flags/flag.h"

ABSL_FLAG(double, repetition_penalty, 0,
          "Hugging Face's repetition penalty: tokens already in the output are made less likely "
          "(> 1) or more likely (< 1); 0 or 1 = off");
ABSL_FLAG(int, no_repeat_ngram_size, 0,
          "No n-gram of this many tokens occurs twice in an output; 0 = off");
ABSL_FLAG(int, min_output_tokens, 0,
          "End of sentence is banned until this many tokens were generated (Hugging Face's "
          "min_new_tokens); 0 = off");
ABSL_FLAG(std::string, target_prefix, "",
          "Target-language text every translation starts with; the model completes it "
          "(interactive translation). Applies to every input line or text");

namespace glossa {

ControlFlags ControlFlagsValue(std::string* error) {
  ControlFlags c;
  const double penalty = absl::GetFlag(FLAGS_repetition_penalty);
  c.repetition_penalty = static_cast<float>(penalty);
  c.no_repeat_ngram_size = absl::GetFlag(FLAGS_no_repeat_ngram_size);
  c.min_output_tokens = absl::GetFlag(FLAGS_min_output_tokens);
  c.target_prefix = absl::GetFlag(FLAGS_target_prefix);
  error->clear();
  if (!std::isfinite(penalty) || penalty < 0) {
    *error = "--repetition_penalty must be a finite number >= 0 (0 or 1: off)";
  } else if (c.no_repeat_ngram_size < 0 || c.min_output_tokens < 0) {
    *error = "--no_repeat_ngram_size and --min_output_tokens must be 0 or more";
  }
  return c;
}

}  // namespace glossa
