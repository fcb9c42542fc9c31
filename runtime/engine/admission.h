// The engine's admission policy: which waiting sentence a worker takes next, which batch-lane
// rows skip the next decoder step, and which job ends early because it cannot meet its deadline.
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
// (about the last kShareWindowSeconds) fell below batch_min_share: interactive steps then run at
// the cost of their own rows, and under a continuous interactive load batch work still gets its
// share. When the next source in order does not fit, admission stops there (no overtaking), and
// an empty batch always admits it, so nothing starves.
//
// Deadline-aware admission (deadline_admission): the engine learns its step time per batch size
// and the target/source length ratio as it works (decode_estimate.h). A job whose longest
// sentence not yet admitted cannot finish before the job's deadline even if admitted now (at the
// batch size it would join) is ended with DEADLINE_EXCEEDED at once: at Submit, or while it
// waits, or when part of it already decodes (its rows are freed). Without it, jobs wait in
// arrival order (FIFO) and a late job holds its place until its deadline passes.
//
// Everything here is a function of explicit state (AdmissionState, BatchLoad, QueuedJob) and the
// time `now` the caller reads from its clock: no threads, no locks, no clock of its own. The
// engine (engine.h) holds the state under its lock, calls the policy and does the rest: encoding,
// stepping, ending jobs, metrics.
#ifndef GLOSSA_RUNTIME_ENGINE_ADMISSION_H_
#define GLOSSA_RUNTIME_ENGINE_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/decode_estimate.h"
#include "engine/metrics.h"

namespace glossa {

struct AdmissionOptions {
  int max_active_sequences = 64;  // sources decoding together, per worker
  int max_active_rows = 256;      // decoder rows (sources × beams) per step, per worker
  int max_encoder_tokens = 4096;  // source tokens encoded in one admission
  int64_t kv_budget_blocks = 0;   // KV blocks every admitted sequence together may reserve
  double batch_min_share = 0.25;  // the batch lane's reserve, a share of max_active_sequences
  absl::Duration interactive_hold = absl::Seconds(2);
  bool deadline_admission = true;  // deadline order and early refusal; false: arrival order
};

// A job as admission sees it (the engine's job state extends it).
struct QueuedJob {
  // `source_tokens`: each source's length in tokens, end of sentence included.
  explicit QueuedJob(std::vector<int> source_tokens);

  int sources() const { return static_cast<int>(source_tokens.size()); }

  const std::vector<int> source_tokens;
  std::vector<int> longest_from;  // [i]: the longest of sources i.. (tokens); [sources()]: 0
  Lane lane = Lane::kInteractive;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time submitted;
  int beam_size = 1;  // decoder rows of one admitted source
  int kv_blocks = 0;  // KV blocks one admitted source reserves (its worst case)
  int max_new_tokens = 0;
  int prefix_tokens = 0;  // target-prefix tokens, one decoder step each
  int next_source = 0;    // sources before it were admitted (the engine guards it with its lock)
  std::atomic<bool> done{false};  // the job ended: admission drops what is left of it
};

// One source taken by Admit: the job and which of its sources.
struct Admitted {
  std::shared_ptr<QueuedJob> job;
  int index = 0;
};

// The waiting work and what admitted work reserves.
struct AdmissionState {
  bool empty() const { return lanes[0].empty() && lanes[1].empty(); }
  // Drops every waiting job (the reservations stay).
  void Clear();

  // Jobs with sources not yet admitted, by lane, in admission order.
  std::deque<std::shared_ptr<QueuedJob>> lanes[kLanes];
  int64_t pending_sources = 0;  // sources not yet admitted, both lanes
  int64_t pending_by_lane[kLanes] = {0, 0};
  int64_t kv_reserved_blocks = 0;                      // by admitted sequences, until they end
  absl::Time last_interactive = absl::InfinitePast();  // the latest interactive job queued
};

// A worker's batch before an admission, and the interactive work of every worker.
struct BatchLoad {
  int sequences = 0;                  // sequences in the worker's batch
  int batch_lane_sequences = 0;       // of which batch-lane ones
  int64_t rows = 0;                   // their decoder rows
  int64_t interactive_sequences = 0;  // interactive sequences decoding in all workers
};

class AdmissionPolicy {
 public:
  // The batch lane's time share is a moving average over about this many seconds.
  static constexpr double kShareWindowSeconds = 1.0;

  AdmissionPolicy() = default;
  explicit AdmissionPolicy(const AdmissionOptions& options) : options_(options) {}
  const AdmissionOptions& options() const { return options_; }

  // Queues a job of at least one source in its lane: after every job due no later (arrival
  // order on ties) or, without deadline_admission, last. An interactive job's `submitted` time
  // becomes state.last_interactive.
  void Enqueue(std::shared_ptr<QueuedJob> job, AdmissionState& state) const;

  // One admission for a worker whose batch holds `load`: appends the sources it takes to
  // *admitted in the order taken (*admitted is empty on entry), reserves their KV blocks and
  // advances their jobs' next_source; drops the ended jobs it meets from the queues.
  void Admit(const BatchLoad& load, absl::Time now, AdmissionState& state,
             std::vector<Admitted>* admitted) const;

  // Whether Admit may take something for an idle worker now: the head of a lane ended (Admit
  // drops it) or its next source fits the KV budget.
  bool HeadMayStart(const AdmissionState& state) const;

  // Whether a worker's batch-lane rows skip its next step: while interactive rows decode there,
  // unless the batch lane's recent time share fell below batch_min_share.
  bool PauseBatchRows(bool interactive_decoding, double batch_time_share) const;

  // The batch lane's time share after a step that took `took`, in which batch rows stepped or not.
  static double NextBatchTimeShare(double share, absl::Duration took, bool batch_stepped);

  // DEADLINE_EXCEEDED, saying why, when the job's longest source from next_source on cannot
  // finish before the job's deadline if admitted now next to `rows` decoder rows (its own
  // included); OK when it can, when the estimate has no opinion yet, when the job has no
  // deadline or nothing left to admit, and without deadline_admission.
  absl::Status CheckCanFinish(const DecodeEstimate::Figures& estimate, const QueuedJob& job,
                              int64_t rows, absl::Time now) const;

 private:
  struct Budget;
  // The batch lane's reserve, in sequences.
  int BatchReserve() const;
  // Whether interactive work is present for `load`: decoding or queued within interactive_hold.
  bool InteractivePresent(const BatchLoad& load, absl::Time now, const AdmissionState& state) const;
  // Whether `job`'s next source fits next to `budget` (the KV budget always; the others unless
  // the batch is empty).
  bool Fits(const QueuedJob& job, const Budget& budget, const AdmissionState& state) const;
  // Admission passes over one lane while the budgets allow and fewer than `limit` sources were
  // taken; false when the lane's next source did not fit (admission stops there).
  bool AdmitFromLane(Lane lane, int limit, Budget& budget, AdmissionState& state,
                     std::vector<Admitted>* admitted) const;

  AdmissionOptions options_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_ADMISSION_H_
