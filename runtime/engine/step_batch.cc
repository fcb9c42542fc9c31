#include "engine/step_batch.h"

#include <algorithm>

#include "util/status_macros.h"

namespace glossa {

StepBatch::StepBatch(const Model& model) : model_(model) {}

void StepBatch::Add(std::unique_ptr<SequenceGroup> group) { groups_.push_back(std::move(group)); }

int64_t StepBatch::active_rows() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->search.active_beams();
  return n;
}

int64_t StepBatch::stepped_rows() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->paused ? 0 : g->search.active_beams();
  return n;
}

absl::Status StepBatch::Step(std::vector<std::unique_ptr<SequenceGroup>>* finished) {
  GLOSSA_RETURN_IF_ERROR(GatherRows());
  const int64_t vocab = model_.config().target_vocab_size;
  const size_t n = rows_.size();
  if (logits_.size() < n * vocab) logits_.resize(n * vocab);
  if (rows_.empty()) return absl::OkStatus();
  bool screened = false;
  LogitsSummary summary = PrepareSummary(&screened);
  model_.decoder().Step(rows_, scratch_, logits_.data(), &summary);
  AdvanceGroups(summary, screened, finished);
  return absl::OkStatus();
}

absl::Status StepBatch::GatherRows() {
  rows_.clear();
  for (const auto& g : groups_) {
    if (g->paused) continue;
    const int step = g->search.step();
    GLOSSA_RETURN_IF_ERROR(g->cache->Reserve(step + 1));
    for (int b = 0; b < g->search.active_beams(); ++b) {
      DecoderRow row;
      row.token = g->search.input_token(b);
      row.position = step;
      row.cache = g->cache.get();
      row.slot = b;
      row.ancestry = g->search.ancestry(b);
      row.source_batch = g->batch.get();
      row.source = g->source;
      rows_.push_back(row);
    }
  }
  PrepareAttention();
  return absl::OkStatus();
}

void StepBatch::PrepareAttention() {
  const int64_t layers = model_.config().decoder_layers;
  // Sized first, pointed at after: a resize would move the buffer. Nothing is allocated for
  // steps without alignment, nor once the buffers have grown.
  int64_t total = 0;
  size_t r = 0;
  for (const auto& g : groups_) {
    if (g->paused) continue;
    const bool wanted = g->search.wants_alignment();
    for (int b = 0; b < g->search.active_beams(); ++b, ++r) {
      if (wanted) total += layers * rows_[r].source_batch->lengths[rows_[r].source];
    }
  }
  if (total == 0) return;
  if (static_cast<int64_t>(attention_.size()) < total) attention_.resize(total);
  int64_t offset = 0;
  r = 0;
  for (const auto& g : groups_) {
    if (g->paused) continue;
    const bool wanted = g->search.wants_alignment();
    for (int b = 0; b < g->search.active_beams(); ++b, ++r) {
      if (!wanted) continue;
      rows_[r].cross_attention = attention_.data() + offset;
      offset += layers * rows_[r].source_batch->lengths[rows_[r].source];
    }
  }
}

void StepBatch::SetAligned(SequenceGroup& g, int64_t offset) const {
  if (!g.search.wants_alignment()) return;
  const int layer = AlignmentLayer(model_.config());
  for (int b = 0; b < g.search.active_beams(); ++b) {
    const DecoderRow& row = rows_[offset + b];
    const int keys = row.source_batch->lengths[row.source];
    g.search.SetAttention(b, row.cross_attention + int64_t{layer} * keys, keys);
  }
}

LogitsSummary StepBatch::PrepareSummary(bool* screened) {
  // Each search's rows are summarised as the output projection produces them (the normaliser,
  // the argmax and the top list); only the rows of searches that need them are written out.
  const size_t n = rows_.size();
  int top_k = 0;
  top_k_.clear();
  write_.clear();
  for (const auto& g : groups_) {
    if (g->paused) continue;
    const int k = g->search.SummaryTopK();
    top_k = std::max(top_k, k);
    top_k_.push_back(k);
    write_.insert(write_.end(), g->search.active_beams(), k < 0 ? 1 : 0);
  }
  if (stats_.size() < n) stats_.resize(n);
  if (top_count_.size() < n) top_count_.resize(n);
  if (top_.size() < n * top_k) top_.resize(n * top_k);
  LogitsSummary summary;
  summary.stats = stats_.data();
  summary.top_k = top_k;
  summary.top = top_.data();
  summary.top_count = top_count_.data();
  summary.write = write_.data();
  summary.no_logits = AllForced();
  summary.argmax_only = !summary.no_logits && PrepareArgMaxOnly();
  summary.excluded = excluded_.data();
  summary.excluded_offsets = excluded_offsets_.data();
  summary.screened = screened;
  return summary;
}

void StepBatch::AdvanceGroups(const LogitsSummary& summary, bool screened,
                              std::vector<std::unique_ptr<SequenceGroup>>* finished) {
  const int64_t vocab = model_.config().target_vocab_size;
  const int top_k = summary.top_k;
  int64_t offset = 0;
  size_t kept = 0, stepped = 0;
  for (size_t i = 0; i < groups_.size(); ++i) {
    auto& g = groups_[i];
    if (g->paused) {
      groups_[kept++] = std::move(g);
      continue;
    }
    const int beams = g->search.active_beams();
    float* logits = logits_.data() + offset * vocab;
    SetAligned(*g, offset);
    bool summarised = screened || summary.no_logits;
    if (summary.no_logits) {
      g->search.AdvanceForced();
    } else if (screened) {
      g->search.AdvanceToArgMax(static_cast<int>(stats_[offset].index));
    } else {
      summarised = top_k_[stepped] >= 0 && g->search.AdvanceFromSummary(
                                               stats_.data() + offset, top_.data() + offset * top_k,
                                               top_count_.data() + offset, top_k);
    }
    ++stepped;
    if (!summarised) {
      for (int b = 0; b < beams; ++b) {
        if (write_[offset + b] == 0)
          model_.decoder().RowLogits(scratch_, offset + b, logits + b * vocab);
      }
      // An argmax-only summary has no normaliser: the search computes what it needs.
      g->search.Advance(logits, summary.argmax_only ? nullptr : stats_.data() + offset);
    }
    offset += beams;
    if (g->search.done()) {
      finished->push_back(std::move(g));
    } else {
      groups_[kept++] = std::move(g);
    }
  }
  groups_.resize(kept);
}

bool StepBatch::AllForced() const {
  for (const auto& g : groups_) {
    if (!g->paused && !g->search.ForcedWithoutRow()) return false;
  }
  return true;
}

bool StepBatch::PrepareArgMaxOnly() {
  excluded_.clear();
  excluded_offsets_.assign(1, 0);
  for (const auto& g : groups_) {
    if (g->paused) continue;
    if (!g->search.ArgMaxOnly()) return false;
    g->search.ExcludedNow(&excluded_);  // one row: greedy
    excluded_offsets_.push_back(static_cast<int>(excluded_.size()));
  }
  return true;
}

}  // namespace glossa
