#include "engine/decode_estimate.h"

#include <algorithm>
#include <cmath>

namespace glossa {

int DecodeEstimate::Bucket(int64_t rows) {
  int b = 0;
  for (int64_t r = std::max<int64_t>(rows, 1); r > 1; r >>= 1) ++b;
  return std::min(b, kBuckets - 1);
}

void DecodeEstimate::ObserveStep(int64_t rows, absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  if (!(seconds >= 0.0)) return;
  absl::MutexLock lock(&mu_);
  const int b = Bucket(rows);
  // The first observations are averaged plainly, later ones with a constant weight.
  const double weight = std::max(kAlpha, 1.0 / static_cast<double>(++step_count_[b]));
  step_seconds_[b] += weight * (seconds - step_seconds_[b]);
}

void DecodeEstimate::ObserveSentence(int64_t source_tokens, int64_t output_tokens) {
  const double ratio = static_cast<double>(std::max<int64_t>(output_tokens, 0)) /
                       static_cast<double>(std::max<int64_t>(source_tokens - 1, 1));
  absl::MutexLock lock(&mu_);
  const double weight = std::max(kAlpha, 1.0 / static_cast<double>(++sentences_));
  ratio_ += weight * (ratio - ratio_);
}

std::optional<double> DecodeEstimate::StepSecondsLocked(int64_t rows) const {
  for (int b = Bucket(rows); b >= 0; --b) {
    if (step_count_[b] >= kMinSteps) return step_seconds_[b];
  }
  return std::nullopt;
}

std::optional<absl::Duration> DecodeEstimate::StepTime(int64_t rows) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::optional<double> s = StepSecondsLocked(rows);
  if (!s) return std::nullopt;
  return absl::Seconds(*s);
}

std::optional<double> DecodeEstimate::LengthRatio() const {
  absl::ReaderMutexLock lock(&mu_);
  if (sentences_ < kMinSentences) return std::nullopt;
  return ratio_;
}

std::optional<absl::Duration> DecodeEstimate::Estimate(int64_t source_tokens, int max_new_tokens,
                                                       int prefix_tokens, int64_t rows) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::optional<double> step = StepSecondsLocked(rows);
  if (!step || sentences_ < kMinSentences) return std::nullopt;
  const double generated =
      std::floor(kRatioShare * ratio_ * static_cast<double>(std::max<int64_t>(source_tokens - 1, 0))) + 1;
  const double steps =
      std::min(generated, static_cast<double>(std::max(max_new_tokens, 1))) + prefix_tokens;
  return absl::Seconds(steps * *step);
}

}  // namespace glossa
