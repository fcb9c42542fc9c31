// Greedy and beam search over one source, with Hugging Face's semantics for Marian so that
// outputs match transformers' generate() token for token:
//   - logits -> log_softmax -> processors (banned ids -> -inf; at the last allowed step every id
//     but the forced EOS -> -inf and EOS -> 0) -> + beam score -> top 2·beams over beams × vocab;
//   - a candidate EOS ranked below `beams` is ignored; a finished hypothesis scores
//     sum_logprobs / generated_len^length_penalty (generated_len counts the EOS);
//   - with early_stopping false a source is done once `beams` hypotheses are finished and the
//     best running candidate / (t+1)^length_penalty cannot beat the worst of them;
//   - at the length limit the running beams join the finished ones.
// Greedy takes the argmax of the processed logits; its score is the sum of the chosen tokens'
// log-probabilities (the forced EOS counting 0).
// A forced first token (forced_bos_id: the target language of M2M100, NLLB and mBART-50) is
// Hugging Face's ForcedBOSTokenLogitsProcessor: at step 0 every other id is -inf and it is 0, so
// it costs nothing, counts in the length, and beam search continues from that one hypothesis
// (Hugging Face's other initial beams carry -1e9 and never win a place).
//
// Decoding controls (SearchOptions), as Hugging Face's logits processors, in its order:
// repetition penalty, no-repeat n-grams, banned ids, minimum new tokens, forced EOS. Greedy and
// sampling apply them to the raw logits, beam search to the log-probabilities (as generate()
// does; a repetition penalty therefore changes beam scores but not greedy ones). A target prefix
// is fed first, one forced token per step, unscored: the search proper starts after it, and
// lengths (max_new_tokens, min_new_tokens, the length penalty's) count the tokens after it, as
// Hugging Face counts them for `decoder_input_ids`.
//
// A search knows nothing of the decoder: the caller runs one decoder row per active beam (input
// token, cache slot = beam index, ancestry), then hands the logits to Advance().
//
// Per step, the vocabulary work is fused (ops.h): greedy takes the argmax and the normaliser in
// one pass over the logits plus one of exp, and beam search keeps each beam's best 2·beams
// log-probabilities + beam score without writing the log-softmax row; the scores are bit for bit
// those of log_softmax -> processors -> + beam score. Most steps do not read the rows at all:
// the decoder summarises them as the output projection produces them (Decoder::Step's
// LogitsSummary: normaliser, argmax, largest logits; greedy without scores, the argmax alone)
// and AdvanceFromSummary decides from that.
//
// Constrained beam search (SearchOptions::constraints; constraints.h): Hugging Face's
// generate(num_beams=N, force_words_ids=...), its _constrained_beam_search and
// ConstrainedBeamSearchScorer, token for token:
//   - beam search's candidates (top 2·beams), but an EOS candidate finishes a hypothesis only
//     when its constraints are all met;
//   - process() keeps the first `beams` non-EOS candidates; step_sentence_constraint adds, for
//     each running beam whose constraints are not all met, one candidate per token that makes
//     progress (ConstraintListState.advance(), scored from that beam's row, unless the sequence
//     is already a candidate), then keeps `beams` of them by bank (ConstrainedCandidates::Select,
//     constraints.h);
//   - Hugging Face runs `beams` hypotheses from the first step, scored 0, -1e9, -1e9, ...: here
//     they share the one row of the first step (the engine hands one), and become beams of
//     their own after it. Beams scored -inf (an advance token that the forced first token
//     excludes) run like any other until they lose their place, as in Hugging Face;
//   - at the length limit, the running beams that meet the constraints join the finished ones;
//     when fewer than num_hypotheses do, every other running beam joins too.
// A step whose top candidates tie (always the forced EOS step: its -inf scores) orders them as
// torch.topk does on the CPU (TorchTopK), not lowest index first: that decides which -inf
// hypotheses Hugging Face keeps. Constrained steps always need the rows (SummaryTopK() -1, never
// ForcedWithoutRow() but for the prefix). The state of each beam is kept incrementally
// (Beam::constraints), which equals Hugging Face's reset() from the whole sequence, the decoder
// start included.
//
// Allocation: the constructor sizes every buffer for the worst case (beam_size hypotheses of
// max_new_tokens tokens, beam_size + 1 finished ones, the constrained candidates), so Advance()
// allocates nothing, but for constrained search's first tie (TorchTopK's beams × vocab pairs,
// kept for the next ones; sized here, they would hold that memory in every constrained search,
// most of which tie only at the length limit's forced EOS, if at all). Results() and StablePrefix()
// return new vectors. Move a Search rather than copying it: a copy's vectors lose the reserved
// capacity.
#ifndef GLOSSA_RUNTIME_DECODE_SEARCH_H_
#define GLOSSA_RUNTIME_DECODE_SEARCH_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "decode/constraints.h"
#include "ops/ops.h"

namespace glossa {

// Random sampling instead of greedy search (beam_size must then be 1): logits processed as for
// greedy, divided by the temperature, cut to the top_k most likely and to the smallest set whose
// probability reaches top_p (Hugging Face's warpers, in that order), then sampled.
struct SamplingOptions {
  float temperature = 0.0f;  // > 0 switches sampling on
  int top_k = 0;             // 0: no cut
  float top_p = 1.0f;        // 1: no cut
  uint64_t seed = 0;
};

struct SearchOptions {
  int beam_size = 1;
  int max_new_tokens = 256;  // tokens generated after the prefix, EOS included
  float length_penalty = 1.0f;
  bool early_stopping = false;
  int num_hypotheses = 1;  // <= beam_size
  int forced_bos_id = -1;  // the first generated token, -1 for none (per request)
  SamplingOptions sampling;
  float repetition_penalty = 1.0f;  // 1: off; > 1 discourages tokens already in the output
  int no_repeat_ngram_size = 0;     // 0: off
  int min_new_tokens = 0;           // EOS banned until this many tokens follow the prefix
  std::vector<int> prefix;          // target ids every hypothesis starts with
  bool token_scores = false;        // Hypothesis::token_scores wanted
  // Hypothesis::alignment and attention wanted: the caller gives each step's attention row of
  // every active beam (SetAttention) before advancing.
  bool alignment = false;
  // Greedy's Hypothesis::score wanted (beam search always scores). Without it the score is 0
  // and a step may be decided from the argmax alone (ArgMaxOnly).
  bool scores = true;
  // Each must appear in the output (constrained beam search, Hugging Face's force_words_ids, in
  // order; see above): beam search only (ValidateConstraints). Empty: unconstrained.
  std::vector<Constraint> constraints;

  // Decoder positions (and KV cache slots per beam) a hypothesis may use.
  int positions() const { return static_cast<int>(prefix.size()) + max_new_tokens; }
  bool has_controls() const {
    return repetition_penalty != 1.0f || no_repeat_ngram_size > 0 || min_new_tokens > 0;
  }
};

struct SearchVocab {
  int vocab_size = 0;
  int eos_id = 0;
  int decoder_start_id = 0;
  int forced_eos_id = -1;  // -1: none
  std::vector<int> banned_ids;
};

// OK when options.constraints can be searched for; INVALID_ARGUMENT otherwise: a bad constraint
// (CheckConstraints), a beam_size below 2 (Hugging Face's constrained search is a beam search),
// sampling. Search itself does not check: callers validate requests with this first.
absl::Status ValidateConstraints(const SearchOptions& options, const SearchVocab& vocab);

struct Hypothesis {
  std::vector<int> tokens;  // prefix + generated tokens, ending with EOS unless cut by the limit
  float score = 0.0f;       // beam: normalised by length; greedy: sum of log-probabilities
  // With SearchOptions::token_scores: each token's log-probability under the model (the raw
  // log-softmax, before any processor; the prefix's teacher-forced), one per token.
  std::vector<float> token_scores;
  // With SearchOptions::alignment: for each token, the source position that the attention row
  // SetAttention gave for the decoder row that produced it weighs most (-1 where none was
  // given), one per token; and those rows, [tokens, source length] (zeros where none was given).
  std::vector<int> alignment;
  std::vector<float> attention;
};

class Search {
 public:
  Search(const SearchOptions& options, const SearchVocab& vocab);

  bool done() const { return done_; }
  int step() const { return step_; }  // position of the next input tokens
  int active_beams() const { return active_; }
  int slots() const { return options_.beam_size; }  // cache slots this search needs
  int max_new_tokens() const { return options_.max_new_tokens; }
  int positions() const { return options_.positions(); }
  bool wants_alignment() const { return options_.alignment; }
  int prefix_length() const { return static_cast<int>(options_.prefix.size()); }
  int input_token(int beam) const;
  // [step() + 1] cache slot of each position of this beam's history; the last is `beam`.
  const int* ancestry(int beam) const { return beams_[beam].ancestry.data(); }

  // With SearchOptions::alignment: the attention over the source, row[source_length], of beam
  // `beam`'s row of this step (for the token it produces). Call before advancing the step; a row
  // is kept per cache slot and step, like the KV cache, so a hypothesis reads its own through its
  // ancestry. The first call sizes the buffer for every slot and step (the only allocation).
  void SetAttention(int beam, const float* row, int source_length);

  // Consumes this step's logits, [active_beams(), vocab_size], overwritten as scratch. `stats`,
  // when given, holds each row's ops::ComputeArgMaxLogSumExp (computed by the caller while the
  // logits were in cache), so that the search need not read the rows for it.
  void Advance(float* logits, const ops::ArgMaxLogSumExp* stats = nullptr);

  // The step from summaries of the logits instead of the rows (Decoder::Step's LogitsSummary):
  // SummaryTopK() is how many of each row's largest logits this step needs (0: greedy, the
  // argmax suffices), -1 when it needs the rows themselves (prefix and forced steps, sampling,
  // a repetition penalty, no-repeat n-grams, token scores).
  // AdvanceFromSummary takes each active beam's ComputeArgMaxLogSumExp (stats) and top list
  // (top[b * top_k ...], top_count[b] entries; top_k >= SummaryTopK() >= 0) and advances
  // exactly as Advance would on the rows; it returns false, having changed nothing, when the
  // summaries cannot decide the step (a rounding tie at the edge of the top list, non-finite
  // logits, a banned argmax): then call Advance with the rows.
  static constexpr int kMaxSummaryTopK = 48;
  static constexpr int kSummarySlack = 4;  // top-list entries beyond the 2 * beams needed
  int SummaryTopK() const;
  bool AdvanceFromSummary(const ops::ArgMaxLogSumExp* stats, const ops::ScoredId* top,
                          const int* top_count, int top_k);

  // Greedy without a score at a step that needs only the argmax of the processed logits: the
  // argmax of the raw logits over every id but ExcludedNow()'s. Then AdvanceToArgMax(token)
  // advances exactly as Advance would (at a forced step it ignores `token`).
  bool ArgMaxOnly() const;
  // Appends the ids the processors set to -inf at this step without reading the row.
  void ExcludedNow(std::vector<int>* ids) const;
  void AdvanceToArgMax(int token);
  // This step's token is forced and nothing needs its logits (no token scores; at greedy's
  // forced EOS, no score either): the forced BOS, a prefix token, the forced EOS. Then
  // AdvanceForced() advances exactly as Advance would, without the rows.
  bool ForcedWithoutRow() const;
  void AdvanceForced();

  // Tokens every possible final result starts with: the common prefix of the running beams and
  // the finished hypotheses (for greedy, all tokens so far). Streaming sends these.
  std::vector<int> StablePrefix() const;
  // StablePrefix().size(), without allocating.
  size_t StablePrefixLength() const;

  // The n-best list, best first. Valid once done().
  std::vector<Hypothesis> Results() const;

 private:
  struct Beam {
    std::vector<int> tokens;
    std::vector<int> ancestry;
    std::vector<float> token_scores;  // with options_.token_scores
    float score = 0.0f;               // sum of log-probabilities
    ConstraintState constraints;      // constrained search: its progress through the constraints
  };
  struct Finished {
    double score = 0.0;  // Hugging Face keeps these as Python floats
    std::vector<int> tokens;
    std::vector<float> token_scores;
    std::vector<int> ancestry;  // with options_.alignment
  };
  struct Candidate {
    float score;
    int beam;
    int token;
  };

  // Tokens generated after the prefix so far.
  int new_tokens() const { return step_ - prefix_length(); }
  bool ForcedStep() const {
    return vocab_.forced_eos_id >= 0 && new_tokens() == options_.max_new_tokens - 1;
  }
  bool ForcedBosStep() const { return options_.forced_bos_id >= 0 && step_ == 0; }
  // The forced first token as a step of constrained beam search (Hugging Face's forced-BOS
  // processor on every beam), not AdvanceForcedBos's single hypothesis.
  bool ConstrainedBosStep() const {
    return constrained_ && ForcedBosStep() && options_.prefix.empty();
  }
  // Step 0 with a forced first token: the one hypothesis takes it at no cost.
  void AdvanceForcedBos(const float* row);
  // Row `beam`'s ComputeArgMaxLogSumExp: the caller's (Advance's stats) or computed now.
  ops::ArgMaxLogSumExp RowStats(int beam, const float* row) const;
  ops::LogSumExp RowLse(int beam, const float* row) const;
  bool Banned(int id) const;
  bool BannedNow(int id) const;
  void ApplyProcessors(float* row) const;
  // The decoding controls on one beam's row (raw logits, or log-probabilities for beam search).
  void ApplyControls(int beam, float* row);
  void BanRepeatedNgrams(const Beam& beam, float* row) const;
  // The token of a prefix step: the same for the single running beam.
  void AdvancePrefix(float* row);
  void AdvanceGreedy(float* logits);
  // Appends the greedy token (logit: its raw logit; forced: the forced EOS, scored 0).
  void TakeGreedyToken(int token, float logit, ops::LogSumExp lse, bool forced);
  // AdvanceFromSummary's test: fills top_ / top_count_ (beam) or summary_token_ (greedy) and
  // returns true when the summaries decide the step.
  bool SummaryDecides(const ops::ArgMaxLogSumExp* stats, const ops::ScoredId* top,
                      const int* top_count, int top_k);
  // Beam search's step once top_ holds each beam's best: candidates, finished hypotheses, the
  // next beams.
  void FinishBeamStep();
  // Picks a token from the processed logits of the single beam by sampling.
  int Sample(float* row);
  void AdvanceBeam(float* logits);
  // Beam search's processors on row `beam` (raw logits), in place: TopKLogProbs(row, returned
  // normaliser, beam score) then gives log_softmax -> processors -> + beam score exactly. With
  // forced_token >= 0 every other id is -inf and it is 0 (the normaliser {0, 0}). Keeps the raw
  // row for token scores.
  ops::LogSumExp ProcessBeamRow(int beam, float* row, int forced_token);
  // The raw log-probability of `token` in row `row` kept by ProcessBeamRow (0 without token
  // scores).
  float TokenScore(int row, int token) const;
  // `next` = `parent` + token, scored `score` (sum of log-probabilities).
  void ExtendBeam(const Beam& parent, int token, float token_score, float score, Beam* next);
  // Constrained beam search: the constructor's part, the step (see above) and its parts.
  void InitConstraints();
  void AdvanceConstrained(float* logits);
  // Among the candidates process() reads, two different sequences score the same, or the last
  // one the same as one left out: torch.topk's order may then differ from MergeCandidates'.
  bool CandidatesTie(int stride) const;
  // candidates_ in torch.topk's own order (CPU): over the (score, index) pairs of the flattened
  // beams × vocab, std::partial_sort when k * 64 <= n, else std::nth_element then std::sort of
  // the first k - 1, with a "greater, NaN first" comparator; libstdc++'s order of equal scores.
  void TorchTopK(const float* logits);
  // Hugging Face's other initial beams: copies of beam 0 scored -1e9, sharing its row.
  void CloneFirstBeam();
  // This step's row of `beam`: all read row 0 at the first constrained step.
  int RowOf(int beam) const { return shared_row_ ? 0 : beam; }
  // process(): finishes the EOS candidates whose constraints are met, and keeps the first
  // `beams` other candidates in constrained_candidates_; returns how many.
  int KeepTopKConstrained(int generated_len);
  // step_sentence_constraint's advance candidates, scored from the processed rows.
  void AddAdvanceCandidates(const float* logits);
  // No candidate yet is `beam`'s tokens + `token`.
  bool IsNewSequence(int beam, int token) const;
  void TakeConstrainedBeams(const std::vector<int>& order);
  // finalize() at the length limit.
  void FinalizeConstrained();
  // candidates_ = the `count` best (score, beam, token) over the active beams, from each beam's
  // sorted top_ list (`stride` apart): higher score first, then lower beam, then lower token
  // (torch.topk over the flattened beams × vocab, lowest index first among equals).
  void MergeCandidates(int count, int stride);
  // Adds `tokens` (+ `last` when >= 0) as a finished hypothesis.
  void AddFinished(const Beam& beam, int last, float last_score, float sum_logprobs,
                   int generated_len);
  bool IsDone(float best_sum_logprobs, int generated_len) const;
  void PrepareNextStep();

  SearchOptions options_;
  SearchVocab vocab_;
  int step_ = 0;
  bool done_ = false;
  // beam_size entries each; the first active_ of beams_ are the running hypotheses.
  std::vector<Beam> beams_, next_beams_;
  int active_ = 1;
  const ops::ArgMaxLogSumExp* stats_ = nullptr;  // Advance's, during the call
  int summary_token_ = 0;                        // SummaryDecides' greedy token
  float summary_logit_ = 0.0f;
  std::vector<ops::ScoredId> top_;          // [beam_size][2·beam_size]: each beam's best this step
  std::vector<int> top_count_, merge_pos_;  // [beam_size]
  std::vector<Candidate> candidates_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int>> sorted_;  // sampling scratch
  // Raw rows kept for token scores, [beam_size][vocab], and each row's normaliser.
  std::vector<float> raw_rows_;
  std::vector<ops::LogSumExp> raw_lse_;
  std::vector<float> gathered_;  // repetition-penalty scratch: one value per history token
  // beam_size + 1 slots; the first finished_count_ are the finished hypotheses, in insertion
  // order like Hugging Face's BeamHypotheses.
  std::vector<Finished> finished_;
  // With options_.alignment: SetAttention's rows, [slot * positions() + step][source_length_].
  std::vector<float> attention_;
  int source_length_ = 0;
  // Fills h.alignment and h.attention for its first h.tokens.size() tokens, from its ancestry.
  void AddAlignment(const std::vector<int>& ancestry, Hypothesis* h) const;
  size_t finished_count_ = 0;
  double worst_finished_ = 1e9;
  // Constrained beam search (all empty without constraints).
  bool constrained_ = false;
  ConstraintSet constraint_set_;
  ConstrainedCandidates constrained_candidates_;
  std::vector<ops::LogSumExp> row_lse_;  // [beam_size]: ProcessBeamRow's normaliser of each row
  std::vector<AdvanceBank> advance_;     // one beam's advance tokens
  ConstraintState scratch_state_;
  // TorchTopK's pairs: [active beams × vocab], sized at the first tie.
  std::vector<std::pair<float, int>> torch_topk_;
  bool shared_row_ = false;  // this step's beams all read row 0 (the first constrained step)
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_DECODE_SEARCH_H_
