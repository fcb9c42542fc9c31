// The engine: requests in, translations out, with continuous batching.
//
// Submit() queues a job and returns at once. Each worker thread runs a step loop: between two
// decoder steps it admits queued sources while the budgets allow (decoder rows, KV cache, encoder
// tokens per admission), encodes the admitted sources together, runs ONE decoder step for every
// active sequence of every job (greedy and beam rows side by side), and retires finished,
// cancelled or expired sequences at once, returning their KV blocks.
//
// Admission (admission.h): two lanes, interactive before batch, with the batch lane's reserve
// share; earliest deadline first within a lane, one source per job per pass; batch rows paused
// while interactive rows decode; early DEADLINE_EXCEEDED for jobs that cannot finish in time
// (counted in EngineMetrics::refused_late_total). The engine holds the admission state under its
// lock and asks AdmissionPolicy at Submit and between two steps.
//
// Invariants:
//  - a job's on_done runs exactly once, on a worker thread, never under an engine lock;
//  - the KV budget counts each admitted sequence's worst case (beams × max length), so a step
//    never runs out of cache mid-flight;
//  - no lock is held while the encoder or decoder runs.
#ifndef GLOSSA_RUNTIME_ENGINE_ENGINE_H_
#define GLOSSA_RUNTIME_ENGINE_ENGINE_H_

#include <atomic>
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
#include "engine/admission.h"
#include "engine/decode_estimate.h"
#include "engine/metrics.h"
#include "engine/model.h"
#include "engine/step_batch.h"
#include "layers/kv_cache.h"
#include "text/glossary.h"

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
  bool alignment = false;  // TranslatedHypothesis::alignment
  bool scores = true;  // Hypothesis::score of greedy search (beam search always scores)
  // The language pair (text/languages.h): the target decides the forced first token of
  // multilingual models; the source token is the tokenizer's business (TokenizeTexts).
  std::string source_language;
  std::string target_language;
  // Terms whose targets the translations of texts holding them must contain (beam search only);
  // Translator turns them into Job::constraints. Engine::Resolve ignores them.
  std::vector<GlossaryTerm> glossary;
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
  // finish in time (admission.h); false: arrival order, and jobs end only when their deadline
  // passes.
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
  // Empty, or one list per source: the constraints of that source's search (its
  // SearchOptions::constraints; glossary terms), beam search only (ValidateConstraints).
  std::vector<std::vector<Constraint>> constraints;
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
  int64_t kv_bytes_allocated = 0;  // blocks the pool holds (it keeps them once allocated)
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
  struct Worker;

  absl::Time Now() const;
  void WorkerLoop(Worker* worker);
  // Blocks until this worker has something to do; false when it should exit.
  bool WaitForWork(Worker* worker);
  void Iterate(Worker* worker);
  // Takes what the policy admits for `worker` into *admitted; with abort_, empties the queues.
  void Admit(Worker* worker, std::vector<Admitted>* admitted);
  // Copies the queue lengths to the atomics stats() reads.
  void PublishQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndExpiredJobs(Worker* worker);
  void StartSequences(Worker* worker, std::vector<Admitted>& admitted);
  // Encodes `live`'s sources and adds their sequences to the batch, counting them in `added`.
  void AddSequences(Worker* worker, const std::vector<Admitted>& live,
                    const std::vector<std::vector<int>>& sources, size_t* added);
  // Returns the rows it decoded.
  int64_t StepOnce(Worker* worker);
  // After a failed step: ends the job of every sequence in the worker's batch or in `finished`
  // with `status`.
  void EndEverySequence(Worker* worker, std::vector<std::unique_ptr<SequenceGroup>>& finished,
                        const absl::Status& status);
  // The job's time to first token, the first time one of its sequences stepped (at `now`).
  void ObserveFirstTokens(JobState& job, absl::Time now);
  // Calls on_tokens for each sequence whose certain prefix grew.
  void StreamStableTokens(Worker* worker);
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
  // INVALID_ARGUMENT when a source or the search options are out of range for this engine.
  absl::Status CheckJob(const Job& job) const;
  // Each source's constraints with the job's search options (ValidateConstraints).
  absl::Status CheckConstraintsOf(const Job& job) const;
  // The search of source `source` of `job`: the job's options with that source's constraints.
  Search NewSearch(const Job& job, int source) const;
  // The target prefix's ids (no EOS); INVALID_ARGUMENT when it is not UTF-8 or too long.
  absl::StatusOr<std::vector<int>> EncodePrefix(const std::string& text) const;

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  SearchVocab vocab_;
  KvBlockPool pool_;
  int64_t kv_budget_blocks_;
  AdmissionPolicy policy_;

  mutable absl::Mutex mu_;
  absl::CondVar work_;
  // The queued jobs (every one a JobState) and the KV blocks admitted sequences reserve.
  AdmissionState admission_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<JobState>> live_jobs_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool abort_ ABSL_GUARDED_BY(mu_) = false;  // end everything with UNAVAILABLE
  bool stop_ ABSL_GUARDED_BY(mu_) = false;   // workers exit once idle
  std::vector<std::unique_ptr<Worker>> workers_;

  std::atomic<int64_t> active_sequences_{0}, active_rows_{0}, steps_{0}, step_rows_{0};
  std::atomic<int64_t> batch_paused_steps_{0};
  std::atomic<int64_t> queued_{0};  // admission_.pending_sources, readable without mu_
  std::atomic<int64_t> queued_by_lane_[kLanes] = {0, 0};
  std::atomic<int64_t> active_by_lane_[kLanes] = {0, 0};
  std::unique_ptr<Worker> manual_;  // workers == 0
  EngineMetrics metrics_;
  DecodeEstimate estimate_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_ENGINE_H_
