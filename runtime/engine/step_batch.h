// The set of sequence groups (one per source: a greedy sequence or a beam) that advance together,
// one decoder step for all of them at a time. Groups may join between any two steps and leave as
// soon as their search is done; this is the loop a continuous-batching scheduler drives.
#ifndef GLOSSA_RUNTIME_ENGINE_STEP_BATCH_H_
#define GLOSSA_RUNTIME_ENGINE_STEP_BATCH_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "decode/search.h"
#include "engine/model.h"
#include "layers/kv_cache.h"

namespace glossa {

struct JobState;  // engine.h: the request a group belongs to

struct SequenceGroup {
  // The search is moved in: a copy would lose the capacity it reserved (see search.h).
  SequenceGroup(Search search, std::shared_ptr<const EncodedBatch> batch, int source,
                std::unique_ptr<KvCache> cache)
      : search(std::move(search)), batch(std::move(batch)), source(source), cache(std::move(cache)) {}
  Search search;
  std::shared_ptr<const EncodedBatch> batch;
  int source;  // index into batch
  std::unique_ptr<KvCache> cache;
  std::shared_ptr<JobState> job;
  int index = 0;       // which of the job's sources
  int kv_blocks = 0;   // KV blocks reserved for this group's worst case
  size_t streamed = 0;  // tokens already reported as stable
  bool paused = false;  // skipped by Step (keeps its place and its KV cache)
};

class StepBatch {
 public:
  explicit StepBatch(const Model& model);

  void Add(std::unique_ptr<SequenceGroup> group);
  bool empty() const { return groups_.empty(); }
  const std::vector<std::unique_ptr<SequenceGroup>>& groups() const { return groups_; }

  // Moves the groups for which drop(group) holds to *dropped (their KV cache with them).
  template <typename Pred>
  void RemoveIf(Pred drop, std::vector<std::unique_ptr<SequenceGroup>>* dropped) {
    size_t kept = 0;
    for (auto& g : groups_) {
      if (drop(*g)) {
        dropped->push_back(std::move(g));
      } else {
        groups_[kept++] = std::move(g);
      }
    }
    groups_.resize(kept);
  }
  int64_t active_rows() const;

  // One decoder step for every group not paused; groups whose search finished are moved to
  // *finished. RESOURCE_EXHAUSTED when the KV cache has no room (the batch is left unchanged).
  absl::Status Step(std::vector<std::unique_ptr<SequenceGroup>>* finished);
  // The rows the next Step decodes (those of groups not paused).
  int64_t stepped_rows() const;

 private:
  const Model& model_;
  std::vector<std::unique_ptr<SequenceGroup>> groups_;
  std::vector<DecoderRow> rows_;
  DecoderScratch scratch_;
  std::vector<float> logits_;  // rows the summaries cannot stand for
  // Decoder::Step's LogitsSummary, per row; top_k_ per stepped search.
  std::vector<ops::ArgMaxLogSumExp> stats_;
  std::vector<ops::ScoredId> top_;
  std::vector<int> top_count_, top_k_;
  std::vector<uint8_t> write_;
  // LogitsSummary's argmax-only request: every stepped row's excluded ids, and where each
  // row's start.
  std::vector<int> excluded_, excluded_offsets_;
  // The cross-attention of the rows of searches that want an alignment (DecoderRow's), one
  // after the other.
  std::vector<float> attention_;
  // Fills rows_ with the rows of every group not paused, reserving their KV cache.
  absl::Status GatherRows();
  // Points the rows of searches that want an alignment at attention_.
  void PrepareAttention();
  // Gives `g`'s search the attention of each of its rows (from rows_[offset]) in the alignment
  // layer.
  void SetAligned(SequenceGroup& g, int64_t offset) const;
  // The decoder's summary request for rows_, in this batch's buffers; the decoder sets
  // *screened when it found the argmax from the screen.
  LogitsSummary PrepareSummary(bool* screened);
  // Advances every stepped group from the summary or the logits; moves the groups whose search
  // is done to *finished.
  void AdvanceGroups(const LogitsSummary& summary, bool screened,
                     std::vector<std::unique_ptr<SequenceGroup>>* finished);
  // Sets up an argmax-only request when every stepped search allows one; false otherwise.
  bool PrepareArgMaxOnly();
  // Every stepped search takes a forced token that needs no logits (Search::ForcedWithoutRow).
  bool AllForced() const;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_STEP_BATCH_H_
