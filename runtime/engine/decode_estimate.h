// Online estimates of how long a sentence takes to decode, for deadline-aware admission.
//
// Two figures, both learnt from the engine's own work: the time of one iteration of a worker's
// step loop (admission, encoding and one decoder step: a sequence advances one token per
// iteration) as a function of the rows (sentences × beams) it decodes, per power-of-two bucket of rows (an exponential
// moving average of the measured steps), and the target/source length ratio of finished
// sentences (a moving average). A sentence of n source tokens is expected to need
// ratio × (n - 1) + 1 steps (the + 1 is its end of sentence), at most its output limit, plus one
// per target-prefix token, each taking the step time at the batch size it would join.
//
// The estimate is meant to say when a request CANNOT finish in time, so it leans optimistic: it
// uses kRatioShare of the mean length ratio, and the step time of the bucket of the given rows or,
// when that bucket was never measured, of the nearest smaller one measured (steps over fewer rows
// are not slower). Until kMinSteps steps and kMinSentences sentences were seen it has no opinion.
// Thread-safe.
#ifndef GLOSSA_RUNTIME_ENGINE_DECODE_ESTIMATE_H_
#define GLOSSA_RUNTIME_ENGINE_DECODE_ESTIMATE_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace glossa {

class DecodeEstimate {
 public:
  static constexpr double kRatioShare = 0.75;
  static constexpr int kMinSteps = 8;        // per bucket, before it is used
  static constexpr int kMinSentences = 16;
  static constexpr double kAlpha = 0.05;     // weight of a new observation

  void ObserveStep(int64_t rows, absl::Duration took);
  // A finished sentence: its source tokens (end of sentence included) and the tokens generated
  // (end of sentence excluded).
  void ObserveSentence(int64_t source_tokens, int64_t output_tokens);

  // The decoding time of one sentence joining a batch that will then decode `rows` rows;
  // nullopt while the estimate has too few observations.
  std::optional<absl::Duration> Estimate(int64_t source_tokens, int max_new_tokens,
                                         int prefix_tokens, int64_t rows) const;

  // For metrics and logs: the step-time estimate at `rows` and the mean length ratio.
  std::optional<absl::Duration> StepTime(int64_t rows) const;
  std::optional<double> LengthRatio() const;

 private:
  static constexpr int kBuckets = 16;  // rows 1, 2-3, 4-7, ... up to 2^15
  static int Bucket(int64_t rows);
  std::optional<double> StepSecondsLocked(int64_t rows) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::array<double, kBuckets> step_seconds_ ABSL_GUARDED_BY(mu_) = {};
  std::array<int64_t, kBuckets> step_count_ ABSL_GUARDED_BY(mu_) = {};
  double ratio_ ABSL_GUARDED_BY(mu_) = 0.0;
  int64_t sentences_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_DECODE_ESTIMATE_H_
