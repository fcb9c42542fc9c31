// The engine: requests in, translations out, with continuous batching.
//
// Submit() queues a job and returns at once. Each worker thread runs a step loop: between two
// decoder steps it admits queued sources while the budgets allow (decoder rows, KV cache, encoder
// tokens per admission), encodes the admitted sources together, runs ONE decoder step for every
// active sequence of every job (greedy and beam rows side by side), and retires finished,
// cancelled or expired sequences at once, returning their KV blocks.
//
// Admission policy: two lanes, interactive and batch. Within a lane jobs wait in deadline order
// (earliest first; jobs without a deadline after those with one, in arrival order), and each
// admission pass takes ONE source from each waiting job in that order, passes repeating while the
// budgets allow: a job of many sentences gets one slot per pass like any other job, so a short
// request behind a long one waits for at most one pass's worth of the long one's sentences.
// Interactive work is admitted before batch work; batch work fills what interactive work leaves.
// So that batch work is never starved, the batch lane keeps a reserve: while it has work waiting
// and fewer than batch_min_share × max_active_sequences of a worker's sequences are batch work,
// it is admitted up to that share ahead of waiting interactive work. While interactive work is
// present (decoding, waiting, or submitted within interactive_hold), batch work is held to that
// share, so that interactive sentences do not decode in steps made slow by a full batch;
// otherwise (and whenever the worker would idle) it fills all the capacity. And while
// interactive sentences decode in a worker, its batch sentences are paused (they keep their
// place and KV cache but skip steps), unless the batch lane's share of the worker's recent time
// (about the last second) fell below batch_min_share: interactive steps then run at the cost of
// their own rows, and under a continuous interactive load batch work still gets its share.
// When the next source in order does not fit, admission stops there (no overtaking), and an
// empty batch always admits it, so nothing starves.
//
// Deadline-aware admission (deadline_admission): the engine learns its step time per batch size
// and the target/source length ratio as it works (decode_estimate.h). A job whose longest
// sentence not yet admitted cannot finish before the job's deadline even if admitted now (at the
// batch size it would join) is ended with DEADLINE_EXCEEDED at once: at Submit, or while it
// waits, or when part of it already decodes (its rows are freed). Counted in
// EngineMetrics::refused_late_total. Without it, jobs wait in arrival order (FIFO) and a late
// job holds its place until its deadline passes.
//
// Invariants:
//  - a job's on_done runs exactly once, on a worker thread, never under an engine lock;
//  - the KV budget counts each admitted sequence's worst case (beams × max length), so a step
//    never runs out of cache mid-flight;
//  - no lock is held while the encoder or decoder runs.
#ifndef GLOSSA_RUNTIME_ENGINE_ENGINE_H_
#define GLOSSA_RUNTIME_ENGINE_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "decode/search.h"
#include "engine/decode_estimate.h"
#include "engine/metrics.h"
#include "engine/model.h"
#include "engine/step_batch.h"
#include "layers/kv_cache.h"

namespace glossa {

// Per-request decoding options; zero / unset means "the default".
struct TranslateOptions {
  int beam_size = 0;
  std::optional<float> length_penalty;
  int max_output_tokens = 0;  // tokens generated after the prefix, EOS included
  int num_hypotheses = 0;
  SamplingOptions sampling;  // temperature > 0: sample (beam_size 1); seed 0: a random seed
  // Hugging Face's decoding controls (see search.h); zero values are off.
  float repetition_penalty = 0.0f;  // 0 or 1: off
  int no_repeat_ngram_size = 0;
  int min_output_tokens = 0;  // HF's min_new_tokens: EOS banned before this many tokens
  std::string target_prefix;  // target-language text every hypothesis starts with
  bool token_scores = false;
  bool scores = true;  // Hypothesis::score of greedy search (beam search always scores)
  // The language pair (text/languages.h): the target decides the forced first token of
  // multilingual models; the source token is the tokenizer's business (TokenizeTexts).
  std::string source_language;
  std::string target_language;
};

// Time source, injectable for tests.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

struct EngineOptions {
  int workers = 1;             // step loops, each with its own OpenMP team; 0: none, the caller
                               // drives the engine with RunOnce() (deterministic tests)
  int threads_per_worker = 1;  // OpenMP threads of each worker
  int max_active_sequences = 64;  // sources decoding together, per worker
  int max_active_rows = 256;      // decoder rows (sources × beams) per step, per worker
  int max_encoder_tokens = 4096;  // source tokens encoded in one admission
  int max_queued_sources = 4096;  // queued sources beyond which Submit says RESOURCE_EXHAUSTED
  // Share of max_active_sequences the batch lane may always fill, even with interactive work
  // waiting (its guarantee against starvation); 0: batch work only ever fills idle capacity.
  double batch_min_share = 0.25;
  absl::Duration interactive_hold = absl::Seconds(2);
  // Earliest deadline first within a lane, and early DEADLINE_EXCEEDED for jobs that cannot
  // finish in time (see above); false: arrival order, and jobs end only when their deadline passes.
  bool deadline_admission = true;
  int64_t kv_cache_bytes = int64_t{1} << 30;  // worst-case KV cache of all admitted sequences
  int default_beam_size = 4;
  int max_beam_size = 16;
  int max_output_tokens = 0;  // default and ceiling; 0: the model's max_length - 1
  const Clock* clock = nullptr;  // nullptr: the real clock
};

using JobResult = absl::StatusOr<std::vector<std::vector<Hypothesis>>>;

struct Job {
  std::vector<std::vector<int>> sources;  // token ids, each ending with </s>
  SearchOptions search;
  Lane lane = Lane::kInteractive;
  absl::Time deadline = absl::InfiniteFuture();
  // Optional, for jobs of one source: called after a step with the tokens that are now certain
  // (Search::StablePrefix), each time it grows.
  std::function<void(const std::vector<int>& stable_tokens)> on_tokens;
  // Called once: the n-best lists, in source order, or why the job stopped.
  std::function<void(JobResult)> on_done;
  // Safe from any thread; the job stops within one step with CANCELLED.
  void Cancel() { cancelled.store(true, std::memory_order_relaxed); }
  std::atomic<bool> cancelled{false};
};

struct EngineStats {
  int64_t queued_sources = 0;
  int64_t queued_by_lane[kLanes] = {0, 0};
  int64_t active_sequences = 0;
  int64_t active_by_lane[kLanes] = {0, 0};
  int64_t active_rows = 0;
  int64_t kv_blocks_in_use = 0;
  int64_t kv_bytes_in_use = 0;
  int64_t kv_bytes_capacity = 0;
  int64_t steps = 0;
  int64_t step_rows = 0;  // sum over steps of the rows decoded: / steps = mean batch
  int64_t batch_paused_steps = 0;  // steps that left batch-lane rows waiting (interactive first)
};

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, EngineOptions options = {});
  ~Engine();  // Shutdown(now)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Fills in the defaults; INVALID_ARGUMENT names the option out of range.
  absl::StatusOr<SearchOptions> Resolve(const TranslateOptions& options) const;
  // Checks the job's sources, then queues it and returns at once: INVALID_ARGUMENT for a bad
  // source, RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after Shutdown began. When
  // Submit fails, on_done is not called.
  absl::Status Submit(std::shared_ptr<Job> job);
  // Stops accepting work, lets admitted and queued jobs finish until `deadline`, then ends the
  // rest with UNAVAILABLE and joins the workers. Idempotent.
  void Shutdown(absl::Time deadline);

  // Lock-free: safe to call from a metrics scrape at any time.
  EngineStats stats() const;

  // With workers == 0: one iteration of the step loop on the calling thread (admit, end
  // cancelled or expired jobs, encode the admitted, one decoder step). Returns false when there
  // was nothing to do.
  bool RunOnce();
  const EngineMetrics& metrics() const { return metrics_; }
  const DecodeEstimate& estimate() const { return estimate_; }
  const Model& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Pending {
    std::shared_ptr<JobState> job;
    int index;
  };
  struct Worker;

  absl::Time Now() const;
  void WorkerLoop(Worker* worker);
  // Blocks until this worker has something to do; false when it should exit.
  bool WaitForWork(Worker* worker);
  void Iterate(Worker* worker);
  struct Budget;
  void Admit(Worker* worker, std::vector<Pending>* admitted);
  // Admission passes over one lane while `budget` allows and fewer than `limit` sources were
  // taken; false when the lane's next source did not fit (admission must stop there).
  bool AdmitFromLane(Lane lane, int limit, Budget& budget, std::vector<Pending>* admitted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool QueuesEmpty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lanes_[0].empty() && lanes_[1].empty();
  }
  void EndExpiredJobs(Worker* worker);
  void StartSequences(Worker* worker, std::vector<Pending>& admitted);
  // Returns the rows it decoded.
  int64_t StepOnce(Worker* worker);
  // Pauses the worker's batch-lane groups for the next step while interactive sequences decode,
  // unless the batch lane's recent share of the worker's time fell below batch_min_share. True
  // when batch rows will step.
  bool PauseBatchWork(Worker* worker);
  void Release(SequenceGroup& group);
  void RecordFinished(const SequenceGroup& group);
  // Marks the job finished (false if it already was); its on_done is still to be called.
  bool MarkFinished(const std::shared_ptr<JobState>& job);
  void FinishJob(const std::shared_ptr<JobState>& job, JobResult result);
  int KvBlocksFor(const SearchOptions& search) const;
  // Why a job whose sentences from `next_source` on are not admitted yet cannot finish before its
  // deadline, if admitted now next to `rows` decoder rows; OK when it can or nobody knows yet.
  absl::Status CheckCanFinish(const DecodeEstimate::Figures& estimate, const JobState& job,
                              int next_source, int64_t rows, absl::Time now) const;
  // The target prefix's ids (no EOS); INVALID_ARGUMENT when it is not UTF-8 or too long.
  absl::StatusOr<std::vector<int>> EncodePrefix(const std::string& text) const;

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  SearchVocab vocab_;
  KvBlockPool pool_;
  int64_t kv_budget_blocks_;

  mutable absl::Mutex mu_;
  absl::CondVar work_;
  // Jobs with sources waiting, by lane, in deadline order.
  std::deque<std::shared_ptr<JobState>> lanes_[kLanes] ABSL_GUARDED_BY(mu_);
  int64_t pending_sources_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pending_by_lane_[kLanes] ABSL_GUARDED_BY(mu_) = {0, 0};
  std::vector<std::shared_ptr<JobState>> live_jobs_ ABSL_GUARDED_BY(mu_);
  int64_t kv_reserved_blocks_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  absl::Time last_interactive_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool abort_ ABSL_GUARDED_BY(mu_) = false;  // end everything with UNAVAILABLE
  bool stop_ ABSL_GUARDED_BY(mu_) = false;   // workers exit once idle
  std::vector<std::unique_ptr<Worker>> workers_;

  std::atomic<int64_t> active_sequences_{0}, active_rows_{0}, steps_{0}, step_rows_{0};
  std::atomic<int64_t> batch_paused_steps_{0};
  std::atomic<int64_t> queued_{0};  // pending_sources_, readable without mu_
  std::atomic<int64_t> queued_by_lane_[kLanes] = {0, 0};
  std::atomic<int64_t> active_by_lane_[kLanes] = {0, 0};
  std::unique_ptr<Worker> manual_;  // workers == 0
  EngineMetrics metrics_;
  DecodeEstimate estimate_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_ENGINE_H_
