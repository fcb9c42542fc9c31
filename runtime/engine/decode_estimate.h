// Online estimates of how long a sentence takes to decode, for deadline-aware admission.
//
// Two figures, both learnt from the engine's own work: the time of one iteration of a worker's
// step loop (admission, encoding and one decoder step: a sequence advances one token per
// iteration) as a function of the rows (sentences × beams) it decodes, per power-of-two bucket
// of rows (an exponential moving average), and the target/source length ratio of finished
// sentences (a moving average). A sentence of n source tokens is expected to need
// ratio × (n - 1) + 1 steps (the + 1 is its end of sentence), at most its output limit, plus one
// per target-prefix token, each taking the step time at the batch size it would join.
//
// The estimate is meant to say when a request CANNOT finish in time, so it leans optimistic: it
// uses kRatioShare of the mean length ratio, and the step time of the bucket of the given rows or,
// when that bucket was never measured, of the nearest smaller one measured (steps over fewer rows
// are not slower). Until kMinSteps steps and kMinSentences sentences were seen it has no opinion.
// Thread-safe; Read() copies the figures once for many estimates without the lock.
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
  static constexpr int kBuckets = 16;        // rows 1, 2-3, 4-7, ... up to 2^15

  // What has been learnt, at one moment.
  struct Figures {
    std::array<double, kBuckets> step_seconds = {};
    std::array<int64_t, kBuckets> step_count = {};
    double ratio = 0.0;
    int64_t sentences = 0;

    // The decoding time of one sentence joining a batch that will then decode `rows` rows;
    // nullopt while there are too few observations.
    std::optional<absl::Duration> Estimate(int64_t source_tokens, int max_new_tokens,
                                           int prefix_tokens, int64_t rows) const;
    std::optional<absl::Duration> StepTime(int64_t rows) const;
    std::optional<double> LengthRatio() const;
  };

  void ObserveStep(int64_t rows, absl::Duration took);
  // A finished sentence: its source tokens (end of sentence included) and the tokens generated
  // (end of sentence excluded).
  void ObserveSentence(int64_t source_tokens, int64_t output_tokens);

  Figures Read() const;
  std::optional<absl::Duration> Estimate(int64_t source_tokens, int max_new_tokens,
                                         int prefix_tokens, int64_t rows) const {
    return Read().Estimate(source_tokens, max_new_tokens, prefix_tokens, rows);
  }
  std::optional<absl::Duration> StepTime(int64_t rows) const { return Read().StepTime(rows); }
  std::optional<double> LengthRatio() const { return Read().LengthRatio(); }

 private:
  mutable absl::Mutex mu_;
  Figures figures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_DECODE_ESTIMATE_H_
