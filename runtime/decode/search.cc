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
  beams_.resize(1);
  beams_[0].ancestry.push_back(0);
  next_beams_.resize(options_.beam_size);
  candidates_.reserve(4 * options_.beam_size * options_.beam_size);
  rng_.seed(options_.sampling.seed);
}

int Search::input_token(int beam) const {
  const auto& tokens = beams_[beam].tokens;
  return tokens.empty() ? vocab_.decoder_start_id : tokens.back();
}

void Search::ApplyProcessors(float* row) const {
  for (int id : vocab_.banned_ids) row[id] = kNegInf;
  if (vocab_.forced_eos_id >= 0 && step_ == options_.max_new_tokens - 1) {
    std::fill(row, row + vocab_.vocab_size, kNegInf);
    row[vocab_.forced_eos_id] = 0.0f;
  }
}

void Search::Advance(float* logits) {
  if (done_) return;
  if (options_.beam_size == 1) {
    AdvanceGreedy(logits);
  } else {
    AdvanceBeam(logits);
  }
  if (!done_) PrepareNextStep();
}

void Search::AdvanceGreedy(float* row) {
  const int v = vocab_.vocab_size;
  float max = kNegInf;
  for (int i = 0; i < v; ++i) max = std::fmax(max, row[i]);
  float sum = 0.0f;
  for (int i = 0; i < v; ++i) sum += std::exp(row[i] - max);
  const bool forced = vocab_.forced_eos_id >= 0 && step_ == options_.max_new_tokens - 1;
  ApplyProcessors(row);
  int token;
  float logit;
  if (options_.sampling.temperature > 0.0f) {
    // Sampling rewrites the row; keep what the score needs first.
    std::vector<float>& keep = scratch_row_;
    keep.assign(row, row + v);
    token = Sample(row);
    logit = keep[token];
  } else {
    token = static_cast<int>(ops::ArgMax(row, v));
    logit = row[token];
  }
  Beam& beam = beams_[0];
  beam.score += forced ? 0.0f : (logit - max) - std::log(sum);
  beam.tokens.push_back(token);
  ++step_;
  if (token == vocab_.eos_id || step_ >= options_.max_new_tokens) {
    finished_.push_back({beam.score, beam.tokens});
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

// Keeps the `count` best (score, beam, token) of `scores` = one beam's log-probabilities plus
// its running score, appended to candidates_ (earlier ids win ties).
void Search::TopCandidates(const float* scores, int count) {
  const size_t first = candidates_.size();
  for (int b = 0; b < active_beams(); ++b) {
    const float* row = scores + static_cast<int64_t>(b) * vocab_.vocab_size;
    const size_t begin = candidates_.size();
    for (int t = 0; t < vocab_.vocab_size; ++t) {
      const size_t kept = candidates_.size() - begin;
      if (kept == static_cast<size_t>(count) && !(row[t] > candidates_.back().score)) continue;
      if (kept == static_cast<size_t>(count)) candidates_.pop_back();
      auto pos = candidates_.end();
      while (pos != candidates_.begin() + begin && (pos - 1)->score < row[t]) --pos;
      candidates_.insert(pos, Candidate{row[t], b, t});
    }
  }
  std::stable_sort(candidates_.begin() + first, candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  if (candidates_.size() > first + count) candidates_.resize(first + count);
}

void Search::AdvanceBeam(float* logits) {
  const int beams = options_.beam_size;
  const int v = vocab_.vocab_size;
  for (int b = 0; b < active_beams(); ++b) {
    float* row = logits + static_cast<int64_t>(b) * v;
    ops::LogSoftmax(row, v);
    ApplyProcessors(row);
    const float score = beams_[b].score;
    for (int i = 0; i < v; ++i) row[i] += score;
  }
  candidates_.clear();
  TopCandidates(logits, 2 * beams);

  const int generated_len = step_ + 1;  // tokens generated once this step's token is added
  int filled = 0;
  for (size_t rank = 0; rank < candidates_.size() && filled < beams; ++rank) {
    const Candidate& c = candidates_[rank];
    const Beam& parent = beams_[c.beam];
    if (c.token == vocab_.eos_id) {
      if (rank >= static_cast<size_t>(beams)) continue;
      std::vector<int> tokens = parent.tokens;
      tokens.push_back(c.token);
      AddFinished(tokens, c.score, generated_len);
      continue;
    }
    Beam& next = next_beams_[filled++];
    next.tokens = parent.tokens;
    next.tokens.push_back(c.token);
    next.ancestry = parent.ancestry;
    next.score = c.score;
  }
  next_beams_.resize(filled);
  std::swap(beams_, next_beams_);
  next_beams_.resize(beams);
  ++step_;
  done_ = IsDone(candidates_.front().score, generated_len);
  if (!done_ && step_ >= options_.max_new_tokens) {
    for (const Beam& beam : beams_) AddFinished(beam.tokens, beam.score, step_);
    done_ = true;
  }
}

void Search::AddFinished(const std::vector<int>& tokens, float sum_logprobs, int generated_len) {
  const double score = static_cast<double>(sum_logprobs) /
                       std::pow(static_cast<double>(generated_len), options_.length_penalty);
  const size_t beams = static_cast<size_t>(options_.beam_size);
  if (finished_.size() >= beams && !(score > worst_finished_)) return;
  finished_.push_back({score, tokens});
  if (finished_.size() <= beams) {
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
  for (size_t i = 2; i < finished_.size(); ++i) {
    if (less(i, worst)) {
      second = worst;
      worst = i;
    } else if (less(i, second)) {
      second = i;
    }
  }
  worst_finished_ = finished_[second].score;
  finished_.erase(finished_.begin() + worst);
}

bool Search::IsDone(float best_sum_logprobs, int generated_len) const {
  if (finished_.size() < static_cast<size_t>(options_.beam_size)) return false;
  if (options_.early_stopping) return true;
  const double best_possible = static_cast<double>(best_sum_logprobs) /
                               std::pow(static_cast<double>(generated_len), options_.length_penalty);
  return worst_finished_ >= best_possible;
}

void Search::PrepareNextStep() {
  for (int b = 0; b < active_beams(); ++b) beams_[b].ancestry.push_back(b);
}

std::vector<int> Search::StablePrefix() const {
  if (done_) return Results().front().tokens;
  std::vector<int> prefix = beams_.front().tokens;
  auto narrow = [&](const std::vector<int>& tokens) {
    size_t n = 0;
    while (n < prefix.size() && n < tokens.size() && prefix[n] == tokens[n]) ++n;
    prefix.resize(n);
  };
  for (const Beam& b : beams_) narrow(b.tokens);
  for (const Finished& f : finished_) narrow(f.tokens);
  return prefix;
}

std::vector<Hypothesis> Search::Results() const {
  // Hugging Face sorts by score (stable) and pops from the end: best first, later-added first on
  // ties.
  std::vector<size_t> order(finished_.size());
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
