#include "engine/metrics.h"

#include <algorithm>
#include <cmath>

namespace glossa {

AtomicHistogram::AtomicHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void AtomicHistogram::Observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  if (value > 0) {
    sum_micro_.fetch_add(static_cast<uint64_t>(std::llround(value * 1e6)),
                         std::memory_order_relaxed);
  }
}

AtomicHistogram::Snapshot AtomicHistogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    s.counts.push_back(counts_[i].load(std::memory_order_relaxed));
  }
  s.count = 0;
  for (uint64_t c : s.counts) s.count += c;  // consistent with the buckets read
  s.sum = static_cast<double>(sum_micro_.load(std::memory_order_relaxed)) / 1e6;
  return s;
}

std::vector<double> AtomicHistogram::SecondsBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> AtomicHistogram::CountBounds(double max) {
  std::vector<double> b;
  for (double v = 1; v < max; v = std::ceil(v * 2)) b.push_back(v);
  b.push_back(max);
  return b;
}

const char* LaneName(Lane lane) {
  return lane == Lane::kBatch ? "batch" : "interactive";
}

EngineMetrics::EngineMetrics()
    : queue_wait_seconds(AtomicHistogram::SecondsBounds()),
      lane_queue_wait_seconds{AtomicHistogram(AtomicHistogram::SecondsBounds()),
                              AtomicHistogram(AtomicHistogram::SecondsBounds())},
      time_to_first_token_seconds(AtomicHistogram::SecondsBounds()),
      encoder_seconds(AtomicHistogram::SecondsBounds()),
      decode_step_seconds(AtomicHistogram::SecondsBounds()),
      batch_sequences(AtomicHistogram::CountBounds(1024)),
      input_tokens(AtomicHistogram::CountBounds(512)),
      output_tokens(AtomicHistogram::CountBounds(512)),
      length_ratio({0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 3, 5}) {}

}  // namespace glossa
