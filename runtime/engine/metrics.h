// Lock-free counters and histograms the engine records into from its step loop. Reading them
// (a metrics scrape) takes no lock the step loop uses, and nothing is ever reset.
#ifndef GLOSSA_RUNTIME_ENGINE_METRICS_H_
#define GLOSSA_RUNTIME_ENGINE_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace glossa {

// Fixed upper bounds (le, ascending); Observe() increments the first bucket whose bound is >= v
// (or the implicit +Inf one). Counts are per bucket, not cumulative.
class AtomicHistogram {
 public:
  explicit AtomicHistogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // bounds.size() + 1 (the last is +Inf)
    uint64_t count = 0;
    double sum = 0.0;
  };
  Snapshot Read() const;

  // Bounds for durations in seconds, 1 ms .. 60 s.
  static std::vector<double> SecondsBounds();
  // Bounds for counts from 1 to `max`, roughly doubling.
  static std::vector<double> CountBounds(double max);

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> sum_micro_{0};  // sum × 1e6, so that it stays an integer atomic
};

// Admission lanes (admission.h): interactive work before batch work.
enum class Lane { kInteractive = 0, kBatch = 1 };
constexpr int kLanes = 2;
const char* LaneName(Lane lane);  // "interactive", "batch"

struct EngineMetrics {
  EngineMetrics();
  AtomicHistogram queue_wait_seconds;      // Submit -> admission, per sentence
  AtomicHistogram lane_queue_wait_seconds[kLanes];  // the same, by lane
  AtomicHistogram time_to_first_token_seconds;  // Submit -> first certain token, per job
  AtomicHistogram encoder_seconds;         // one batched encoder call
  AtomicHistogram decode_step_seconds;     // one decoder step over every active row
  AtomicHistogram batch_sequences;         // rows (sentences × beams) per decoder step
  AtomicHistogram input_tokens;            // per sentence, end of sentence included
  AtomicHistogram output_tokens;           // per sentence (best hypothesis), EOS excluded
  AtomicHistogram length_ratio;            // output / input tokens, per sentence
  std::atomic<uint64_t> input_tokens_total{0};
  std::atomic<uint64_t> output_tokens_total{0};
  std::atomic<uint64_t> sentences_total{0};
  std::atomic<uint64_t> truncated_total{0};   // best hypothesis cut by the length limit
  std::atomic<uint64_t> cancelled_total{0};   // jobs
  std::atomic<uint64_t> expired_total{0};     // jobs past their deadline
  std::atomic<uint64_t> refused_late_total{0};  // jobs ended early: they could not finish in time
  std::atomic<uint64_t> rejected_total{0};    // jobs refused: queue full
  std::atomic<uint64_t> encoder_real_tokens_total{0};    // tokens encoded
  std::atomic<uint64_t> encoder_padded_tokens_total{0};  // sentences × longest, per encoder call:
                                                         // what a padded batch would compute
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_METRICS_H_
