#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ops/ops.h"

namespace glossa {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

absl::Status ValidateConstraints(const SearchOptions& options, const SearchVocab& vocab) {
  if (options.constraints.empty()) return absl::OkStatus();
  if (options.sampling.temperature > 0.0f) {
    return absl::InvalidArgumentError(
        "constraints need beam search: they cannot be combined with sampling");
  }
  if (options.beam_size < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "constraints need beam search with beam_size >= 2 (Hugging Face's constrained beam "
        "search), not beam_size ",
        options.beam_size));
  }
  return CheckConstraints(options.constraints, vocab.vocab_size);
}

Search::Search(const SearchOptions& options, const SearchVocab& vocab)
    : options_(options), vocab_(vocab) {
  options_.beam_size = std::max(1, options_.beam_size);
  options_.num_hypotheses = std::clamp(options_.num_hypotheses, 1, options_.beam_size);
  options_.max_new_tokens = std::max(1, options_.max_new_tokens);
  const int beams = options_.beam_size, length = options_.positions();
  const bool scores = options_.token_scores;
  const bool sampling = options_.sampling.temperature > 0.0f;
  constrained_ = !options_.constraints.empty() && beams > 1 && !sampling;
  // Every buffer at its worst-case size now, so that Advance() never allocates.
  for (auto* set : {&beams_, &next_beams_}) {
    set->resize(beams);
    for (Beam& b : *set) {
      b.tokens.reserve(length);
      b.ancestry.reserve(length + 1);
      if (scores) b.token_scores.reserve(length);
    }
  }
  active_ = 1;
  beams_[0].ancestry.push_back(0);
  finished_.resize(beams + 1);
  for (Finished& f : finished_) {
    f.tokens.reserve(length);
    if (scores) f.token_scores.reserve(length);
    if (options_.alignment) f.ancestry.reserve(length + 1);
  }
  if (beams > 1) {
    // Constrained search keeps one more per beam (AdvanceConstrained).
    top_.resize(static_cast<size_t>(beams) * (2 * beams + (constrained_ ? 1 : 0)));
    top_count_.resize(beams);
    merge_pos_.resize(beams);
    candidates_.reserve(2 * beams);
  }
  if (sampling) sorted_.reserve(vocab_.vocab_size);
  // Greedy keeps its raw row when sampling or controls rewrite it (its score is of raw logits);
  // beam search only for token scores.
  const int raw_rows = beams > 1 ? (scores ? beams : 0) : (sampling || options_.has_controls());
  raw_rows_.resize(static_cast<size_t>(raw_rows) * vocab_.vocab_size);
  raw_lse_.resize(beams);
  if (options_.repetition_penalty != 1.0f) gathered_.reserve(length + 1);
  rng_.seed(options_.sampling.seed);
  if (constrained_) InitConstraints();
}

void Search::InitConstraints() {
  const int beams = options_.beam_size;
  constraint_set_ = ConstraintSet(options_.constraints);
  const int advance = constraint_set_.max_advance();
  constrained_candidates_.Reserve(beams + beams * advance);
  advance_.reserve(advance);
  row_lse_.resize(beams);
  scratch_state_.Reset(constraint_set_);
  for (auto* set : {&beams_, &next_beams_}) {
    for (Beam& b : *set) b.constraints.Reset(constraint_set_);
  }
  // Hugging Face's sequences start with the decoder start token.
  beams_[0].constraints.Add(constraint_set_, vocab_.decoder_start_id);
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

void Search::ApplyControls(int beam_index, float* row) {
  const Beam& beam = beams_[beam_index];
  if (options_.repetition_penalty != 1.0f) {
    // Hugging Face gathers the scores of every token of the sequence (the decoder start too),
    // then scatters the penalised values back: a token that occurs twice is penalised once.
    const float p = options_.repetition_penalty;
    auto penalise = [p](float x) { return x < 0.0f ? x * p : x / p; };
    gathered_.clear();
    gathered_.push_back(row[vocab_.decoder_start_id]);
    for (int id : beam.tokens) gathered_.push_back(row[id]);
    row[vocab_.decoder_start_id] = penalise(gathered_[0]);
    for (size_t i = 0; i < beam.tokens.size(); ++i)
      row[beam.tokens[i]] = penalise(gathered_[i + 1]);
  }
  if (options_.no_repeat_ngram_size > 0) BanRepeatedNgrams(beam, row);
  if (new_tokens() < options_.min_new_tokens) row[vocab_.eos_id] = kNegInf;
}

// Hugging Face's NoRepeatNGramLogitsProcessor over the decoder start + the tokens so far: every
// token that would complete an n-gram already in the sequence is banned.
void Search::BanRepeatedNgrams(const Beam& beam, float* row) const {
  const int n = options_.no_repeat_ngram_size;
  const int length = 1 + static_cast<int>(beam.tokens.size());
  if (length + 1 < n) return;
  auto at = [&](int i) { return i == 0 ? vocab_.decoder_start_id : beam.tokens[i - 1]; };
  const int tail = length - (n - 1);  // where the last n-1 tokens start
  for (int i = 0; i + n - 1 < length; ++i) {
    bool match = true;
    for (int k = 0; k < n - 1 && match; ++k) match = at(i + k) == at(tail + k);
    if (match) row[at(i + n - 1)] = kNegInf;
  }
}

ops::ArgMaxLogSumExp Search::RowStats(int beam, const float* row) const {
  return stats_ != nullptr ? stats_[beam] : ops::ComputeArgMaxLogSumExp(row, vocab_.vocab_size);
}

ops::LogSumExp Search::RowLse(int beam, const float* row) const {
  return stats_ != nullptr ? stats_[beam].lse : ops::ComputeLogSumExp(row, vocab_.vocab_size);
}

void Search::Advance(float* logits, const ops::ArgMaxLogSumExp* stats) {
  if (done_) return;
  stats_ = stats;
  if (ForcedBosStep() && !ConstrainedBosStep()) {
    AdvanceForcedBos(logits);
  } else if (step_ < prefix_length()) {
    AdvancePrefix(logits);
  } else if (options_.beam_size == 1) {
    AdvanceGreedy(logits);
  } else if (constrained_) {
    AdvanceConstrained(logits);
  } else {
    AdvanceBeam(logits);
  }
  stats_ = nullptr;
  if (!done_) PrepareNextStep();
}

void Search::AdvancePrefix(float* row) {
  Beam& beam = beams_[0];
  const int token = options_.prefix[step_];
  if (options_.token_scores) {
    const ops::LogSumExp lse = RowLse(0, row);
    beam.token_scores.push_back((row[token] - lse.max) - lse.log_sum);
  }
  beam.tokens.push_back(token);
  if (constrained_) beam.constraints.Add(constraint_set_, token);
  ++step_;
}

void Search::AdvanceForcedBos(const float* row) {
  Beam& beam = beams_[0];
  const int token = options_.forced_bos_id;
  if (options_.token_scores) {  // the model's own log-probability of the forced token
    const ops::LogSumExp lse = RowLse(0, row);
    beam.token_scores.push_back((row[token] - lse.max) - lse.log_sum);
  }
  beam.tokens.push_back(token);
  if (constrained_) beam.constraints.Add(constraint_set_, token);
  active_ = 1;
  ++step_;
  // Hugging Face checks the length limit after the token is added, as for any other token.
  if (token == vocab_.eos_id || new_tokens() >= options_.max_new_tokens) {
    AddFinished(beam, -1, 0.0f, beam.score, options_.beam_size == 1 ? 0 : new_tokens());
    done_ = true;
  }
}

void Search::AdvanceGreedy(float* row) {
  const int v = vocab_.vocab_size;
  const bool forced = ForcedStep();
  const bool sampling = options_.sampling.temperature > 0.0f;
  const bool controls = options_.has_controls();
  ops::LogSumExp lse;  // of the raw logits: the log-probabilities' normaliser
  int token;
  float logit;  // raw
  if (!forced && !sampling && !controls) {
    // The usual step, fused: the argmax of the raw logits is that of the processed ones unless
    // it is a banned id.
    const ops::ArgMaxLogSumExp r = RowStats(0, row);
    lse = r.lse;
    token = static_cast<int>(r.index);
    if (Banned(token)) {
      ApplyProcessors(row);
      token = static_cast<int>(ops::ArgMax(row, v));
    }
    logit = row[token];
  } else {
    // Processors and sampling rewrite the row; the score needs the raw logit.
    lse = RowLse(0, row);
    const bool keep_raw = controls || sampling;  // else only the forced EOS can be chosen
    if (keep_raw) std::copy(row, row + v, raw_rows_.begin());
    const float forced_raw = forced ? row[vocab_.forced_eos_id] : 0.0f;
    if (controls) ApplyControls(0, row);
    ApplyProcessors(row);
    token = sampling ? Sample(row) : static_cast<int>(ops::ArgMax(row, v));
    logit = keep_raw ? raw_rows_[token] : forced_raw;
  }
  TakeGreedyToken(token, logit, lse, forced);
}

void Search::TakeGreedyToken(int token, float logit, ops::LogSumExp lse, bool forced) {
  Beam& beam = beams_[0];
  const float logprob = (logit - lse.max) - lse.log_sum;
  if (options_.scores && !forced) beam.score += logprob;
  if (options_.token_scores) beam.token_scores.push_back(logprob);
  beam.tokens.push_back(token);
  ++step_;
  if (token == vocab_.eos_id || new_tokens() >= options_.max_new_tokens) {
    AddFinished(beam, -1, 0.0f, beam.score, 0);
    done_ = true;
  }
}

// The ids the processors set to -inf at this step without reading the row: the banned ids and,
// before min_new_tokens, EOS.
bool Search::BannedNow(int id) const {
  return Banned(id) || (id == vocab_.eos_id && new_tokens() < options_.min_new_tokens);
}

// A forced token (the forced BOS, a prefix token, the forced EOS at greedy's length limit)
// needs no logits at all while no score is wanted of it.
bool Search::ArgMaxOnly() const {
  if (options_.beam_size != 1 || options_.scores || options_.token_scores || done_) return false;
  return ForcedWithoutRow() || SummaryTopK() >= 0;
}

bool Search::ForcedWithoutRow() const {
  if (done_ || options_.token_scores) return false;
  return (ForcedBosStep() && !ConstrainedBosStep()) || step_ < prefix_length() ||
         (options_.beam_size == 1 && !options_.scores && ForcedStep());
}

void Search::ExcludedNow(std::vector<int>* ids) const {
  ids->insert(ids->end(), vocab_.banned_ids.begin(), vocab_.banned_ids.end());
  if (new_tokens() < options_.min_new_tokens) ids->push_back(vocab_.eos_id);
}

void Search::AdvanceToArgMax(int token) {
  if (ForcedWithoutRow()) return AdvanceForced();
  TakeGreedyToken(token, 0.0f, ops::LogSumExp(), /*forced=*/false);
  if (!done_) PrepareNextStep();
}

void Search::AdvanceForced() {
  if (ForcedBosStep()) {
    AdvanceForcedBos(nullptr);  // these read the row only for token scores
  } else if (step_ < prefix_length()) {
    AdvancePrefix(nullptr);
  } else {
    TakeGreedyToken(vocab_.forced_eos_id, 0.0f, ops::LogSumExp(), /*forced=*/true);
  }
  if (!done_) PrepareNextStep();
}

int Search::SummaryTopK() const {
  if (done_ || ForcedBosStep() || step_ < prefix_length() || ForcedStep() ||
      options_.sampling.temperature > 0.0f || options_.repetition_penalty != 1.0f ||
      options_.no_repeat_ngram_size > 0 || options_.token_scores || constrained_) {
    return -1;
  }
  const bool eos_banned = new_tokens() < options_.min_new_tokens;
  const int banned = static_cast<int>(vocab_.banned_ids.size()) + (eos_banned ? 1 : 0);
  // Greedy needs no list while EOS is allowed: the argmax decides unless it is banned.
  if (options_.beam_size == 1) return eos_banned ? 1 + banned : 0;
  const int k = 2 * options_.beam_size + kSummarySlack + banned;
  return k <= kMaxSummaryTopK ? k : -1;
}

bool Search::AdvanceFromSummary(const ops::ArgMaxLogSumExp* stats, const ops::ScoredId* top,
                                const int* top_count, int top_k) {
  if (!SummaryDecides(stats, top, top_count, top_k)) return false;
  if (options_.beam_size == 1) {
    TakeGreedyToken(summary_token_, summary_logit_, stats[0].lse, /*forced=*/false);
  } else {
    FinishBeamStep();
  }
  if (!done_) PrepareNextStep();
  return true;
}

// Greedy: the row's argmax, unless it is banned (then the processed row's argmax is another);
// while EOS is banned too, the first id of the top list that is not.
// Beam: each beam's top_ from its top list without the banned ids: of its
// k + kSummarySlack largest logits (k = 2 * beams), the scores, sorted (higher score first, then
// lower id), the first k. Scores rise with the logit, so no logit outside the list scores above
// the list's lowest score; the k chosen are exact unless the k-th's score equals that lowest one
// (a tie the list cannot settle). A row with a NaN or an infinity (a NaN normaliser or max), or
// too few values, is undecided.
bool Search::SummaryDecides(const ops::ArgMaxLogSumExp* stats, const ops::ScoredId* top,
                            const int* top_count, int top_k) {
  const int per_beam = options_.beam_size == 1 ? 1 : 2 * options_.beam_size;
  for (int b = 0; b < active_; ++b) {
    const ops::LogSumExp lse = stats[b].lse;
    if (!std::isfinite(lse.max) || !std::isfinite(lse.log_sum)) return false;
    const ops::ScoredId* list = top + static_cast<int64_t>(b) * top_k;
    if (options_.beam_size == 1 && top_k == 0) {
      // lse.max is finite: the argmax's value, not a NaN's.
      summary_token_ = static_cast<int>(stats[0].index);
      summary_logit_ = lse.max;
      return !BannedNow(summary_token_);
    }
    if (options_.beam_size == 1) {  // the first id of the list not banned
      for (int i = 0; i < top_count[0]; ++i) {
        if (BannedNow(list[i].id)) continue;
        summary_token_ = list[i].id;
        summary_logit_ = list[i].score;
        return true;
      }
      return false;
    }
    ops::ScoredId* mine = top_.data() + b * per_beam;
    ops::ScoredId kept[kMaxSummaryTopK];
    int count = 0;
    for (int i = 0; i < top_count[b] && count < per_beam + kSummarySlack; ++i) {
      if (BannedNow(list[i].id)) continue;
      kept[count++] = list[i];
    }
    if (count < per_beam + kSummarySlack) return false;
    const float offset = beams_[b].score;
    for (int i = 0; i < count; ++i) {
      kept[i].score = ((kept[i].score - lse.max) - lse.log_sum) + offset;
    }
    // Ids are distinct: a total order, so std::sort (which allocates nothing) is stable here.
    std::sort(kept, kept + count, [](const ops::ScoredId& a, const ops::ScoredId& c) {
      return a.score > c.score || (a.score == c.score && a.id < c.id);
    });
    if (kept[per_beam - 1].score == kept[count - 1].score) return false;
    std::copy(kept, kept + per_beam, mine);
    top_count_[b] = per_beam;
  }
  return true;
}

int Search::Sample(float* row) {
  const int v = vocab_.vocab_size;
  const SamplingOptions& o = options_.sampling;
  sorted_.clear();
  for (int i = 0; i < v; ++i) {
    if (row[i] > -std::numeric_limits<float>::infinity())
      sorted_.push_back({row[i] / o.temperature, i});
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

void Search::MergeCandidates(int count, int stride) {
  candidates_.clear();
  std::fill(merge_pos_.begin(), merge_pos_.begin() + active_, 0);
  while (static_cast<int>(candidates_.size()) < count) {
    int pick = -1;
    float best = 0.0f;
    for (int b = 0; b < active_; ++b) {
      if (merge_pos_[b] == top_count_[b]) continue;
      const float s = top_[b * stride + merge_pos_[b]].score;
      if (pick < 0 || s > best) {
        pick = b;
        best = s;
      }
    }
    if (pick < 0) break;
    const ops::ScoredId& c = top_[pick * stride + merge_pos_[pick]++];
    candidates_.push_back({c.score, pick, c.id});
  }
}

void Search::AdvanceBeam(float* logits) {
  const int v = vocab_.vocab_size;
  const int per_beam = 2 * options_.beam_size;
  const int forced = ForcedStep() ? vocab_.forced_eos_id : -1;
  for (int b = 0; b < active_; ++b) {
    float* row = logits + static_cast<int64_t>(b) * v;
    const ops::LogSumExp lse = ProcessBeamRow(b, row, forced);
    top_count_[b] =
        ops::TopKLogProbs(row, v, lse, beams_[b].score, per_beam, top_.data() + b * per_beam);
  }
  FinishBeamStep();
}

ops::LogSumExp Search::ProcessBeamRow(int b, float* row, int forced_token) {
  const int v = vocab_.vocab_size;
  // Scores = ((x - max) - log_sum) + beam score, with processors applied as -inf (banned ids,
  // after the normaliser, as Hugging Face); at a forced step the processed row is -inf but 0 at
  // the forced token and the normaliser is not applied: lse = {0, 0} keeps x exactly.
  if (options_.token_scores) {
    raw_lse_[b] = RowLse(b, row);
    std::copy(row, row + v, raw_rows_.begin() + static_cast<int64_t>(b) * v);
  }
  if (forced_token >= 0) {
    std::fill(row, row + v, kNegInf);
    row[forced_token] = 0.0f;
    return ops::LogSumExp();
  }
  // The same normaliser as the raw row's (computed above when token scores are wanted).
  ops::LogSumExp lse = options_.token_scores ? raw_lse_[b] : RowLse(b, row);
  if (options_.repetition_penalty != 1.0f) {
    // The penalty scales log-probabilities: write them out (the same float operations as
    // TopKLogProbs), then lse = {0, 0} keeps them exactly.
    for (int i = 0; i < v; ++i) row[i] = (row[i] - lse.max) - lse.log_sum;
    lse = ops::LogSumExp();
  }
  if (options_.has_controls()) ApplyControls(b, row);
  for (int id : vocab_.banned_ids) row[id] = kNegInf;
  return lse;
}

float Search::TokenScore(int row, int token) const {
  if (!options_.token_scores) return 0.0f;
  const ops::LogSumExp& lse = raw_lse_[row];
  return (raw_rows_[static_cast<int64_t>(row) * vocab_.vocab_size + token] - lse.max) - lse.log_sum;
}

void Search::ExtendBeam(const Beam& parent, int token, float token_score, float score, Beam* next) {
  next->tokens = parent.tokens;  // within the reserved capacity: no allocation
  next->tokens.push_back(token);
  next->ancestry = parent.ancestry;
  next->token_scores = parent.token_scores;
  if (options_.token_scores) next->token_scores.push_back(token_score);
  next->score = score;
  if (constrained_) {
    next->constraints = parent.constraints;  // within the reserved capacity too
    next->constraints.Add(constraint_set_, token);
  }
}

void Search::FinishBeamStep() {
  const int beams = options_.beam_size;
  const int per_beam = 2 * beams;
  MergeCandidates(per_beam, per_beam);

  const int generated_len = new_tokens() + 1;  // once this step's token is added
  int filled = 0;
  for (size_t rank = 0; rank < candidates_.size() && filled < beams; ++rank) {
    const Candidate& c = candidates_[rank];
    const Beam& parent = beams_[c.beam];
    if (c.token == vocab_.eos_id) {
      if (rank >= static_cast<size_t>(beams)) continue;
      AddFinished(parent, c.token, TokenScore(c.beam, c.token), c.score, generated_len);
      continue;
    }
    ExtendBeam(parent, c.token, TokenScore(c.beam, c.token), c.score, &next_beams_[filled++]);
  }
  std::swap(beams_, next_beams_);
  active_ = filled;
  ++step_;
  done_ = IsDone(candidates_.front().score, generated_len);
  if (!done_ && new_tokens() >= options_.max_new_tokens) {
    for (int b = 0; b < active_; ++b) {
      AddFinished(beams_[b], -1, 0.0f, beams_[b].score, new_tokens());
    }
    done_ = true;
  }
}

// One step of Hugging Face's _constrained_beam_search: the candidates of beam search, then
// ConstrainedBeamSearchScorer.process and step_sentence_constraint.
void Search::AdvanceConstrained(float* logits) {
  const int v = vocab_.vocab_size;
  const int per_beam = 2 * options_.beam_size;
  const int stride = per_beam + 1;  // one more: a tie at the edge shows
  const int forced = ForcedStep()           ? vocab_.forced_eos_id
                     : ConstrainedBosStep() ? options_.forced_bos_id
                                            : -1;
  for (int b = 0; b < active_; ++b) {
    row_lse_[b] = ProcessBeamRow(b, logits + static_cast<int64_t>(b) * v, forced);
  }
  shared_row_ = step_ == prefix_length();
  if (shared_row_) CloneFirstBeam();
  for (int b = 0; b < active_; ++b) {
    const int r = RowOf(b);
    top_count_[b] = ops::TopKLogProbs(logits + static_cast<int64_t>(r) * v, v, row_lse_[r],
                                      beams_[b].score, stride, top_.data() + b * stride);
  }
  MergeCandidates(per_beam, stride);
  if (CandidatesTie(stride)) TorchTopK(logits);
  const int generated_len = new_tokens() + 1;  // once this step's token is added
  const int top_k = KeepTopKConstrained(generated_len);
  AddAdvanceCandidates(logits);
  TakeConstrainedBeams(constrained_candidates_.Select(top_k, options_.beam_size));
  ++step_;
  done_ = IsDone(candidates_.front().score, generated_len);
  if (!done_ && new_tokens() >= options_.max_new_tokens) FinalizeConstrained();
}

bool Search::CandidatesTie(int stride) const {
  // The ranks process() reads: up to the `beams`-th candidate that is not EOS.
  size_t used = 0;
  for (int kept = 0; used < candidates_.size() && kept < options_.beam_size; ++used) {
    kept += candidates_[used].token != vocab_.eos_id ? 1 : 0;
  }
  if (used == 0) return false;
  // Equal scores matter unless both are the same sequence (the first step's copies of one beam):
  // either order then makes the same beams.
  auto ties = [&](const Candidate& a, const Candidate& b) {
    return a.score == b.score &&
           (a.token != b.token || beams_[a.beam].tokens != beams_[b.beam].tokens);
  };
  for (size_t i = 1; i < used; ++i) {
    if (ties(candidates_[i - 1], candidates_[i])) return true;
  }
  const Candidate& last = candidates_[used - 1];
  if (used < candidates_.size() && ties(last, candidates_[used])) return true;
  // The best of each beam's rest, outside the merged list.
  for (int b = 0; b < active_; ++b) {
    if (merge_pos_[b] == top_count_[b]) continue;
    const ops::ScoredId& next = top_[b * stride + merge_pos_[b]];
    if (ties(last, {next.score, b, next.id})) return true;
  }
  return false;
}

void Search::TorchTopK(const float* logits) {
  const int v = vocab_.vocab_size;
  const int64_t n = static_cast<int64_t>(active_) * v;
  const int k = static_cast<int>(std::min<int64_t>(2 * options_.beam_size, n));
  // Allocates at the first tie only (see search.h), for every beam at once.
  torch_topk_.reserve(static_cast<size_t>(options_.beam_size) * v);
  torch_topk_.resize(n);
  for (int b = 0; b < active_; ++b) {
    const int r = RowOf(b);
    const float* row = logits + static_cast<int64_t>(r) * v;
    const ops::LogSumExp lse = row_lse_[r];
    for (int i = 0; i < v; ++i) {
      torch_topk_[static_cast<int64_t>(b) * v + i] = {
          ((row[i] - lse.max) - lse.log_sum) + beams_[b].score, b * v + i};
    }
  }
  auto greater = [](const std::pair<float, int>& x, const std::pair<float, int>& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  const auto first = torch_topk_.begin();
  if (int64_t{k} * 64 <= n) {
    std::partial_sort(first, first + k, first + n, greater);
  } else {
    std::nth_element(first, first + (k - 1), first + n, greater);
    std::sort(first, first + (k - 1), greater);
  }
  candidates_.clear();
  for (int i = 0; i < k; ++i) {
    const auto& [score, index] = torch_topk_[i];
    candidates_.push_back({score, index / v, index % v});
  }
}

void Search::CloneFirstBeam() {
  const Beam& first = beams_[0];
  for (int b = 1; b < options_.beam_size; ++b) {
    Beam& clone = beams_[b];  // within the reserved capacity: no allocation
    clone.tokens = first.tokens;
    clone.ancestry = first.ancestry;
    clone.token_scores = first.token_scores;
    clone.constraints = first.constraints;
    clone.score = -1e9f;
  }
  active_ = options_.beam_size;
}

int Search::KeepTopKConstrained(int generated_len) {
  const int beams = options_.beam_size;
  constrained_candidates_.Clear();
  for (size_t rank = 0; rank < candidates_.size() && constrained_candidates_.size() < beams;
       ++rank) {
    const Candidate& c = candidates_[rank];
    const Beam& parent = beams_[c.beam];
    if (c.token == vocab_.eos_id) {
      // Among the first `beams`, it ends a hypothesis whose constraints are all met.
      if (rank < static_cast<size_t>(beams) && parent.constraints.completed()) {
        AddFinished(parent, c.token, TokenScore(RowOf(c.beam), c.token), c.score, generated_len);
      }
      continue;
    }
    scratch_state_ = parent.constraints;
    scratch_state_.Add(constraint_set_, c.token);
    constrained_candidates_.Add({c.score, c.beam, c.token, scratch_state_.Bank(constraint_set_)});
  }
  return constrained_candidates_.size();
}

void Search::AddAdvanceCandidates(const float* logits) {
  for (int b = 0; b < active_; ++b) {
    const Beam& beam = beams_[b];
    if (beam.constraints.completed()) continue;
    beam.constraints.AdvanceBanks(constraint_set_, &scratch_state_, &advance_);
    const int r = RowOf(b);
    const float* row = logits + static_cast<int64_t>(r) * vocab_.vocab_size;
    const ops::LogSumExp lse = row_lse_[r];
    for (const AdvanceBank& a : advance_) {
      if (!IsNewSequence(b, a.token)) continue;
      // The processed score, as TopKLogProbs computes it.
      const float score = ((row[a.token] - lse.max) - lse.log_sum) + beam.score;
      constrained_candidates_.Add({score, b, a.token, a.bank});
    }
  }
}

bool Search::IsNewSequence(int beam, int token) const {
  for (int i = 0; i < constrained_candidates_.size(); ++i) {
    const ConstrainedCandidates::Candidate& c = constrained_candidates_[i];
    if (c.token == token && (c.beam == beam || beams_[c.beam].tokens == beams_[beam].tokens)) {
      return false;
    }
  }
  return true;
}

void Search::TakeConstrainedBeams(const std::vector<int>& order) {
  int filled = 0;
  for (int i : order) {
    const ConstrainedCandidates::Candidate& c = constrained_candidates_[i];
    ExtendBeam(beams_[c.beam], c.token, TokenScore(RowOf(c.beam), c.token), c.score,
               &next_beams_[filled++]);
  }
  std::swap(beams_, next_beams_);
  active_ = filled;
  shared_row_ = false;
}

// The running beams that meet the constraints join the finished hypotheses; when fewer than
// num_hypotheses do, Hugging Face adds every other one too (its loop stops after "enough", but
// never counts those it adds).
void Search::FinalizeConstrained() {
  int met = 0;
  for (int b = 0; b < active_; ++b) {
    if (!beams_[b].constraints.completed()) continue;
    AddFinished(beams_[b], -1, 0.0f, beams_[b].score, new_tokens());
    ++met;
  }
  if (met < options_.num_hypotheses) {
    for (int b = 0; b < active_; ++b) {
      if (beams_[b].constraints.completed()) continue;
      AddFinished(beams_[b], -1, 0.0f, beams_[b].score, new_tokens());
    }
  }
  done_ = true;
}

// Adds the beam's tokens (+ `last` with its token score, when last >= 0) as a finished
// hypothesis; generated_len 0: greedy, whose score is the plain sum.
void Search::AddFinished(const Beam& beam, int last, float last_score, float sum_logprobs,
                         int generated_len) {
  const double score = generated_len == 0 ? static_cast<double>(sum_logprobs)
                                          : static_cast<double>(sum_logprobs) /
                                                std::pow(static_cast<double>(generated_len),
                                                         options_.length_penalty);
  const size_t beams = static_cast<size_t>(options_.beam_size);
  if (finished_count_ >= beams && !(score > worst_finished_)) return;
  Finished& slot = finished_[finished_count_++];
  slot.score = score;
  slot.tokens = beam.tokens;  // within the reserved capacity: no allocation
  slot.token_scores = beam.token_scores;
  if (options_.alignment) slot.ancestry = beam.ancestry;
  if (last >= 0) {
    slot.tokens.push_back(last);
    if (options_.token_scores) slot.token_scores.push_back(last_score);
  }
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
  const double best_possible =
      static_cast<double>(best_sum_logprobs) /
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
    out.push_back({f.tokens, static_cast<float>(f.score), f.token_scores});
    if (options_.alignment) AddAlignment(f.ancestry, &out.back());
  }
  return out;
}

void Search::SetAttention(int beam, const float* row, int source_length) {
  if (!options_.alignment || done_ || beam < 0 || beam >= options_.beam_size ||
      step_ >= positions() || source_length <= 0) {
    return;
  }
  if (attention_.empty()) {
    source_length_ = source_length;
    attention_.assign(static_cast<size_t>(options_.beam_size) * positions() * source_length, 0.0f);
  }
  if (source_length != source_length_) return;  // one source per search
  std::copy(row, row + source_length,
            attention_.begin() + (static_cast<size_t>(beam) * positions() + step_) * source_length);
}

// Token t came from the row at position t, which ran in cache slot ancestry[t].
void Search::AddAlignment(const std::vector<int>& ancestry, Hypothesis* h) const {
  const size_t length = h->tokens.size(), n = static_cast<size_t>(source_length_);
  h->alignment.assign(length, -1);
  h->attention.assign(length * n, 0.0f);
  for (size_t t = 0; t < length && t < ancestry.size() && n > 0; ++t) {
    const float* row = attention_.data() + (static_cast<size_t>(ancestry[t]) * positions() + t) * n;
    std::copy(row, row + n, h->attention.begin() + t * n);
    h->alignment[t] = static_cast<int>(std::max_element(row, row + n) - row);
  }
}

}  // namespace glossa
