#include "engine/admission.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"

namespace glossa {

QueuedJob::QueuedJob(std::vector<int> tokens)
    : source_tokens(std::move(tokens)), longest_from(source_tokens.size() + 1, 0) {
  for (size_t i = source_tokens.size(); i-- > 0;) {
    longest_from[i] = std::max(longest_from[i + 1], source_tokens[i]);
  }
}

void AdmissionState::Clear() {
  for (auto& queue : lanes) queue.clear();
  pending_sources = 0;
  pending_by_lane[0] = pending_by_lane[1] = 0;
}

// What one admission may still add to a worker's batch.
struct AdmissionPolicy::Budget {
  int sequences;  // in the worker's batch, admitted ones included
  int64_t rows;
  int64_t tokens;  // source tokens of this admission
  int batch_lane_sequences;
};

void AdmissionPolicy::Enqueue(std::shared_ptr<QueuedJob> job, AdmissionState& state) const {
  const int lane = static_cast<int>(job->lane);
  const int64_t n = job->sources();
  if (job->lane == Lane::kInteractive) state.last_interactive = job->submitted;
  auto& queue = state.lanes[lane];
  if (options_.deadline_admission) {
    const auto after = std::upper_bound(
        queue.begin(), queue.end(), job->deadline,
        [](absl::Time d, const std::shared_ptr<QueuedJob>& j) { return d < j->deadline; });
    queue.insert(after, std::move(job));
  } else {
    queue.push_back(std::move(job));
  }
  state.pending_sources += n;
  state.pending_by_lane[lane] += n;
}

int AdmissionPolicy::BatchReserve() const {
  return static_cast<int>(std::ceil(options_.batch_min_share * options_.max_active_sequences));
}

bool AdmissionPolicy::InteractivePresent(const BatchLoad& load, absl::Time now,
                                         const AdmissionState& state) const {
  return load.interactive_sequences > 0 || now - state.last_interactive < options_.interactive_hold;
}

void AdmissionPolicy::Admit(const BatchLoad& load, absl::Time now, AdmissionState& state,
                            std::vector<Admitted>* admitted) const {
  Budget budget{load.sequences, load.rows, 0, load.batch_lane_sequences};
  const int reserve = BatchReserve();
  // The batch lane's reserve first, then interactive work, then batch work in what is left,
  // unless interactive work is present (and the worker has something to do).
  const bool fits =
      budget.batch_lane_sequences >= reserve ||
      AdmitFromLane(Lane::kBatch, reserve - budget.batch_lane_sequences, budget, state, admitted);
  if (!fits || !AdmitFromLane(Lane::kInteractive, INT_MAX, budget, state, admitted)) return;
  if (!InteractivePresent(load, now, state) || budget.sequences == 0) {
    AdmitFromLane(Lane::kBatch, INT_MAX, budget, state, admitted);
  }
}

bool AdmissionPolicy::Fits(const QueuedJob& job, const Budget& budget,
                           const AdmissionState& state) const {
  if (state.kv_reserved_blocks + job.kv_blocks > options_.kv_budget_blocks) return false;
  if (budget.sequences == 0) return true;  // an empty batch admits anything within the KV budget
  const int64_t len = job.source_tokens[job.next_source];
  return budget.sequences + 1 <= options_.max_active_sequences &&
         budget.rows + job.beam_size <= options_.max_active_rows &&
         budget.tokens + len <= options_.max_encoder_tokens;
}

bool AdmissionPolicy::AdmitFromLane(Lane lane, int limit, Budget& budget, AdmissionState& state,
                                    std::vector<Admitted>* admitted) const {
  auto& queue = state.lanes[static_cast<int>(lane)];
  int64_t& pending = state.pending_by_lane[static_cast<int>(lane)];
  int taken = 0;
  // Passes over the lane's jobs in order, one source from each per pass.
  while (!queue.empty() && taken < limit) {
    for (auto it = queue.begin(); it != queue.end() && taken < limit;) {
      QueuedJob& job = **it;
      const int n = job.sources();
      if (job.done.load()) {
        state.pending_sources -= n - job.next_source;
        pending -= n - job.next_source;
        it = queue.erase(it);
        continue;
      }
      if (!Fits(job, budget, state)) return false;
      state.kv_reserved_blocks += job.kv_blocks;
      ++budget.sequences;
      budget.rows += job.beam_size;
      budget.tokens += job.source_tokens[job.next_source];
      budget.batch_lane_sequences += lane == Lane::kBatch ? 1 : 0;
      admitted->push_back({*it, job.next_source++});
      --state.pending_sources;
      --pending;
      ++taken;
      it = job.next_source == n ? queue.erase(it) : std::next(it);
    }
  }
  return true;
}

bool AdmissionPolicy::HeadMayStart(const AdmissionState& state) const {
  for (const auto& queue : state.lanes) {
    if (queue.empty()) continue;
    const QueuedJob& job = *queue.front();
    if (job.done.load() || state.kv_reserved_blocks + job.kv_blocks <= options_.kv_budget_blocks) {
      return true;
    }
  }
  return false;
}

bool AdmissionPolicy::PauseBatchRows(bool interactive_decoding, double batch_time_share) const {
  return interactive_decoding && batch_time_share >= options_.batch_min_share;
}

double AdmissionPolicy::NextBatchTimeShare(double share, absl::Duration took, bool batch_stepped) {
  const double keep = std::exp(-absl::ToDoubleSeconds(took) / kShareWindowSeconds);
  return share * keep + (batch_stepped ? 1.0 - keep : 0.0);
}

absl::Status AdmissionPolicy::CheckCanFinish(const DecodeEstimate::Figures& estimate,
                                             const QueuedJob& job, int64_t rows,
                                             absl::Time now) const {
  const absl::Time deadline = job.deadline;
  if (!options_.deadline_admission || deadline == absl::InfiniteFuture() ||
      job.next_source >= job.sources()) {
    return absl::OkStatus();
  }
  const std::optional<absl::Duration> needs = estimate.Estimate(
      job.longest_from[job.next_source], job.max_new_tokens, job.prefix_tokens, rows);
  if (!needs || now + *needs <= deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "this request cannot finish before its deadline: its longest sentence needs about ",
      absl::ToInt64Milliseconds(*needs), " ms of decoding at the current load, and ",
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - now)),
      " ms are left (refused early instead of taking a place it cannot use)"));
}

}  // namespace glossa
