#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/ops.h"

namespace glossa {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

Search::Search(const SearchOptions& options, const SearchVocab& vocab)
    : options_(options), vocab_(vocab) {
  options_.beam_size = std::max(1, options_.beam_size);
  options_.num_hypotheses = std::clamp(options_.num_hypotheses, 1, options_.beam_size);
  options_.max_new_tokens = std::max(1, options_.max_new_tokens);
  const int beams = options_.beam_size, length = options_.max_new_tokens;
  // Every buffer at its worst-case size now, so that Advance() never allocates.
  for (auto* set : {&beams_, &next_beams_}) {
    set->resize(beams);
    for (Beam& b : *set) {
      b.tokens.reserve(length);
      b.ancestry.reserve(length + 1);
    }
  }
  active_ = 1;
  beams_[0].ancestry.push_back(0);
  finished_.resize(beams + 1);
  for (Finished& f : finished_) f.tokens.reserve(length);
  if (beams > 1) {
    top_.resize(static_cast<size_t>(beams) * 2 * beams);
    top_count_.resize(beams);
    merge_pos_.resize(beams);
    candidates_.reserve(2 * beams);
  }
  if (options_.sampling.temperature > 0.0f) {
    sorted_.reserve(vocab_.vocab_size);
    scratch_row_.reserve(vocab_.vocab_size);
  }
  rng_.seed(options_.sampling.seed);
}

int Search::input_token(int beam) const {
  const auto& tokens = beams_[beam].tokens;
  return tokens.empty() ? vocab_.decoder_start_id : tokens.back();
}

bool Search::Banned(int id) const {
  return std::find(vocab_.banned_ids.begin(), vocab_.banned_ids.end(), id) !=
         vocab_.banned_ids.end();
}

void Search::ApplyProcessors(float* row) const {
  for (int id : vocab_.banned_ids) row[id] = kNegInf;
  if (ForcedStep()) {
    std::fill(row, row + vocab_.vocab_size, kNegInf);
    row[vocab_.forced_eos_id] = 0.0f;
  }
}

void Search::Advance(float* logits) {
  if (done_) return;
  if (ForcedBosStep()) {
    AdvanceForcedBos();
  } else if (options_.beam_size == 1) {
    AdvanceGreedy(logits);
  } else {
    AdvanceBeam(logits);
  }
  if (!done_) PrepareNextStep();
}

void Search::AdvanceForcedBos() {
  Beam& beam = beams_[0];
  beam.tokens.push_back(options_.forced_bos_id);
  active_ = 1;
  ++step_;
  // Hugging Face checks the length limit after the token is added, as for any other token.
  if (options_.forced_bos_id == vocab_.eos_id || step_ >= options_.max_new_tokens) {
    AddFinished(beam.tokens, -1, beam.score, options_.beam_size == 1 ? 0 : step_);
    done_ = true;
  }
}

void Search::AdvanceGreedy(float* row) {
  const int v = vocab_.vocab_size;
  const bool forced = ForcedStep();
  const bool sampling = options_.sampling.temperature > 0.0f;
  ops::LogSumExp lse;  // of the raw logits: the log-probabilities' normaliser
  int token;
  float logit;
  if (!forced && !sampling) {
    // The usual step, fused: the argmax of the raw logits is that of the processed ones unless
    // it is a banned id.
    const ops::ArgMaxLogSumExp r = ops::ComputeArgMaxLogSumExp(row, v);
    lse = r.lse;
    token = static_cast<int>(r.index);
    if (Banned(token)) {
      ApplyProcessors(row);
      token = static_cast<int>(ops::ArgMax(row, v));
    }
    logit = row[token];
  } else {
    lse = ops::ComputeLogSumExp(row, v);
    ApplyProcessors(row);
    if (sampling) {
      // Sampling rewrites the row; keep what the score needs first.
      std::vector<float>& keep = scratch_row_;
      keep.assign(row, row + v);
      token = Sample(row);
      logit = keep[token];
    } else {
      token = static_cast<int>(ops::ArgMax(row, v));
      logit = row[token];
    }
  }
  Beam& beam = beams_[0];
  beam.score += forced ? 0.0f : (logit - lse.max) - lse.log_sum;
  beam.tokens.push_back(token);
  ++step_;
  if (token == vocab_.eos_id || step_ >= options_.max_new_tokens) {
    AddFinished(beam.tokens, -1, beam.score, 0);
    done_ = true;
  }
}

int Search::Sample(float* row) {
  const int v = vocab_.vocab_size;
  const SamplingOptions& o = options_.sampling;
  sorted_.clear();
  for (int i = 0; i < v; ++i) {
    if (row[i] > -std::numeric_limits<float>::infinity()) sorted_.push_back({row[i] / o.temperature, i});
  }
  if (sorted_.empty()) return vocab_.eos_id;
  std::sort(sorted_.begin(), sorted_.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < sorted_.size()) sorted_.resize(o.top_k);
  // Probabilities of what is left, most likely first.
  const float max = sorted_.front().first;
  double total = 0;
  for (auto& [value, id] : sorted_) total += (value = std::exp(value - max));
  if (o.top_p < 1.0f) {
    double cumulative = 0;
    size_t keep = 0;
    while (keep < sorted_.size() && (keep == 0 || cumulative < o.top_p * total)) {
      cumulative += sorted_[keep++].first;
    }
    sorted_.resize(keep);
    total = cumulative;
  }
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (const auto& [p, id] : sorted_) {
    if ((r -= p) <= 0) return id;
  }
  return sorted_.back().second;
}

void Search::MergeCandidates(int count) {
  candidates_.clear();
  std::fill(merge_pos_.begin(), merge_pos_.begin() + active_, 0);
  const int per_beam = 2 * options_.beam_size;
  while (static_cast<int>(candidates_.size()) < count) {
    int pick = -1;
    float best = 0.0f;
    for (int b = 0; b < active_; ++b) {
      if (merge_pos_[b] == top_count_[b]) continue;
      const float s = top_[b * per_beam + merge_pos_[b]].score;
      if (pick < 0 || s > best) {
        pick = b;
        best = s;
      }
    }
    if (pick < 0) break;
    const ops::ScoredId& c = top_[pick * per_beam + merge_pos_[pick]++];
    candidates_.push_back({c.score, pick, c.id});
  }
}

void Search::AdvanceBeam(float* logits) {
  const int beams = options_.beam_size;
  const int v = vocab_.vocab_size;
  const int per_beam = 2 * beams;
  const bool forced = ForcedStep();
  for (int b = 0; b < active_; ++b) {
    float* row = logits + static_cast<int64_t>(b) * v;
    // Scores = ((x - max) - log_sum) + beam score, with processors applied as -inf (banned ids,
    // after the normaliser, as Hugging Face); at the forced EOS step the processed row is -inf
    // but 0 at EOS and the normaliser is not applied: lse = {0, 0} keeps x exactly.
    ops::LogSumExp lse;
    if (forced) {
      std::fill(row, row + v, kNegInf);
      row[vocab_.forced_eos_id] = 0.0f;
    } else {
      lse = ops::ComputeLogSumExp(row, v);
      for (int id : vocab_.banned_ids) row[id] = kNegInf;
    }
    top_count_[b] =
        ops::TopKLogProbs(row, v, lse, beams_[b].score, per_beam, top_.data() + b * per_beam);
  }
  MergeCandidates(per_beam);

  const int generated_len = step_ + 1;  // tokens generated once this step's token is added
  int filled = 0;
  for (size_t rank = 0; rank < candidates_.size() && filled < beams; ++rank) {
    const Candidate& c = candidates_[rank];
    const Beam& parent = beams_[c.beam];
    if (c.token == vocab_.eos_id) {
      if (rank >= static_cast<size_t>(beams)) continue;
      AddFinished(parent.tokens, c.token, c.score, generated_len);
      continue;
    }
    Beam& next = next_beams_[filled++];
    next.tokens = parent.tokens;  // within the reserved capacity: no allocation
    next.tokens.push_back(c.token);
    next.ancestry = parent.ancestry;
    next.score = c.score;
  }
  std::swap(beams_, next_beams_);
  active_ = filled;
  ++step_;
  done_ = IsDone(candidates_.front().score, generated_len);
  if (!done_ && step_ >= options_.max_new_tokens) {
    for (int b = 0; b < active_; ++b) {
      AddFinished(beams_[b].tokens, -1, beams_[b].score, step_);
    }
    done_ = true;
  }
}

// generated_len 0: greedy, whose score is the plain sum.
void Search::AddFinished(const std::vector<int>& tokens, int last, float sum_logprobs,
                         int generated_len) {
  const double score =
      generated_len == 0
          ? static_cast<double>(sum_logprobs)
          : static_cast<double>(sum_logprobs) /
                std::pow(static_cast<double>(generated_len), options_.length_penalty);
  const size_t beams = static_cast<size_t>(options_.beam_size);
  if (finished_count_ >= beams && !(score > worst_finished_)) return;
  Finished& slot = finished_[finished_count_++];
  slot.score = score;
  slot.tokens = tokens;  // within the reserved capacity: no allocation
  if (last >= 0) slot.tokens.push_back(last);
  if (finished_count_ <= beams) {
    worst_finished_ = std::min(score, worst_finished_);
    return;
  }
  // Drop the worst (the earliest on ties); the new worst is the second worst.
  size_t worst = 0, second = 1;
  auto less = [&](size_t a, size_t b) {
    return finished_[a].score < finished_[b].score ||
           (finished_[a].score == finished_[b].score && a < b);
  };
  if (less(second, worst)) std::swap(worst, second);
  for (size_t i = 2; i < finished_count_; ++i) {
    if (less(i, worst)) {
      second = worst;
      worst = i;
    } else if (less(i, second)) {
      second = i;
    }
  }
  worst_finished_ = finished_[second].score;
  // Erase it, keeping the insertion order: rotate it to the end (swaps, no allocation).
  std::rotate(finished_.begin() + worst, finished_.begin() + worst + 1,
              finished_.begin() + finished_count_);
  --finished_count_;
}

bool Search::IsDone(float best_sum_logprobs, int generated_len) const {
  if (finished_count_ < static_cast<size_t>(options_.beam_size)) return false;
  if (options_.early_stopping) return true;
  const double best_possible = static_cast<double>(best_sum_logprobs) /
                               std::pow(static_cast<double>(generated_len), options_.length_penalty);
  return worst_finished_ >= best_possible;
}

void Search::PrepareNextStep() {
  for (int b = 0; b < active_; ++b) beams_[b].ancestry.push_back(b);
}

size_t Search::StablePrefixLength() const {
  if (done_) {
    // The best finished hypothesis (Results().front()).
    size_t best = 0;
    for (size_t i = 1; i < finished_count_; ++i) {
      if (!(finished_[i].score < finished_[best].score)) best = i;
    }
    return finished_count_ == 0 ? 0 : finished_[best].tokens.size();
  }
  const std::vector<int>& first = beams_.front().tokens;
  size_t n = first.size();
  auto narrow = [&](const std::vector<int>& tokens) {
    size_t k = 0;
    while (k < n && k < tokens.size() && first[k] == tokens[k]) ++k;
    n = k;
  };
  for (int b = 1; b < active_; ++b) narrow(beams_[b].tokens);
  for (size_t i = 0; i < finished_count_; ++i) narrow(finished_[i].tokens);
  return n;
}

std::vector<int> Search::StablePrefix() const {
  if (done_) return Results().front().tokens;
  const std::vector<int>& first = beams_.front().tokens;
  return std::vector<int>(first.begin(), first.begin() + StablePrefixLength());
}

std::vector<Hypothesis> Search::Results() const {
  // Hugging Face sorts by score (stable) and pops from the end: best first, later-added first on
  // ties.
  std::vector<size_t> order(finished_count_);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return finished_[a].score < finished_[b].score; });
  std::vector<Hypothesis> out;
  for (int n = 0; n < options_.num_hypotheses && !order.empty(); ++n) {
    const Finished& f = finished_[order.back()];
    order.pop_back();
    out.push_back({f.tokens, static_cast<float>(f.score)});
  }
  return out;
}

}  // namespace glossa
