#include "engine/step_batch.h"

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
  const int64_t vocab = model_.config().target_vocab_size;
  if (static_cast<int64_t>(logits_.size()) < static_cast<int64_t>(rows_.size()) * vocab) {
    logits_.resize(rows_.size() * vocab);
  }
  if (rows_.empty()) return absl::OkStatus();
  model_.decoder().Step(rows_, scratch_, logits_.data());
  int64_t offset = 0;
  size_t kept = 0;
  for (size_t i = 0; i < groups_.size(); ++i) {
    auto& g = groups_[i];
    if (g->paused) {
      groups_[kept++] = std::move(g);
      continue;
    }
    const int beams = g->search.active_beams();
    g->search.Advance(logits_.data() + offset * vocab);
    offset += beams;
    if (g->search.done()) {
      finished->push_back(std::move(g));
    } else {
      groups_[kept++] = std::move(g);
    }
  }
  groups_.resize(kept);
  return absl::OkStatus();
}

}  // namespace glossa
