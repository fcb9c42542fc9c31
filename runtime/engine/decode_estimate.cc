#include "engine/decode_estimate.h"

#include <algorithm>
#include <cmath>

namespace glossa {
namespace {

int Bucket(int64_t rows) {
  int b = 0;
  for (int64_t r = std::max<int64_t>(rows, 1); r > 1; r >>= 1) ++b;
  return std::min(b, DecodeEstimate::kBuckets - 1);
}

// A moving average whose first observations are averaged plainly, later ones with weight kAlpha.
void Average(double sample, int64_t& count, double& mean) {
  mean += std::max(DecodeEstimate::kAlpha, 1.0 / static_cast<double>(++count)) * (sample - mean);
}

}  // namespace

void DecodeEstimate::ObserveStep(int64_t rows, absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  if (!(seconds >= 0.0)) return;
  const int b = Bucket(rows);
  absl::MutexLock lock(&mu_);
  Average(seconds, figures_.step_count[b], figures_.step_seconds[b]);
}

void DecodeEstimate::ObserveSentence(int64_t source_tokens, int64_t output_tokens) {
  const double ratio = static_cast<double>(std::max<int64_t>(output_tokens, 0)) /
                       static_cast<double>(std::max<int64_t>(source_tokens - 1, 1));
  absl::MutexLock lock(&mu_);
  Average(ratio, figures_.sentences, figures_.ratio);
}

DecodeEstimate::Figures DecodeEstimate::Read() const {
  absl::ReaderMutexLock lock(&mu_);
  return figures_;
}

std::optional<absl::Duration> DecodeEstimate::Figures::StepTime(int64_t rows) const {
  for (int b = Bucket(rows); b >= 0; --b) {
    if (step_count[b] >= kMinSteps) return absl::Seconds(step_seconds[b]);
  }
  return std::nullopt;
}

std::optional<double> DecodeEstimate::Figures::LengthRatio() const {
  if (sentences < kMinSentences) return std::nullopt;
  return ratio;
}

std::optional<absl::Duration> DecodeEstimate::Figures::Estimate(int64_t source_tokens,
                                                                int max_new_tokens,
                                                                int prefix_tokens,
                                                                int64_t rows) const {
  const std::optional<absl::Duration> step = StepTime(rows);
  if (!step || sentences < kMinSentences) return std::nullopt;
  const double generated =
      std::floor(kRatioShare * ratio * static_cast<double>(std::max<int64_t>(source_tokens - 1, 0))) +
      1;
  const double steps =
      std::min(generated, static_cast<double>(std::max(max_new_tokens, 1))) + prefix_tokens;
  return absl::Seconds(steps * absl::ToDoubleSeconds(*step));
}

}  // namespace glossa
