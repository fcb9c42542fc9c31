// Search on a toy "model" whose logits are a fixed pseudo-random function of the prefix.
#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "gtest/gtest.h"
#include "ops/ops.h"

namespace glossa {
namespace {

constexpr int kVocab = 6, kEos = 0, kStart = 5;

// A generator seeded by a hash (FNV-1a style, from `basis`) of the prefix.
std::mt19937_64 PrefixRng(const std::vector<int>& prefix, uint64_t basis) {
  uint64_t seed = basis;
  for (int t : prefix) seed = (seed ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
  return std::mt19937_64(seed);
}

std::vector<float> ToyLogits(const std::vector<int>& prefix) {
  std::mt19937_64 rng = PrefixRng(prefix, 1469598103934665603ull);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = dist(rng);
  logits[kEos] -= 1.0f;  // make sentences a few tokens long
  return logits;
}

SearchVocab ToyVocab() {
  SearchVocab v;
  v.vocab_size = kVocab;
  v.eos_id = kEos;
  v.decoder_start_id = kStart;
  v.forced_eos_id = kEos;
  v.banned_ids = {kStart};
  return v;
}

// Runs a search to the end. Like the KV cache, the toy remembers each (position, slot)'s input
// token and rebuilds a beam's prefix through its ancestry, so beam reordering is exercised too.
std::vector<Hypothesis> RunToy(const SearchOptions& options) {
  Search search(options, ToyVocab());
  std::vector<std::vector<int>> table;  // [position][slot] input token
  while (!search.done()) {
    const int t = search.step();
    table.emplace_back(options.beam_size, -1);
    std::vector<float> logits;
    for (int b = 0; b < search.active_beams(); ++b) {
      EXPECT_EQ(search.ancestry(b)[t], b);
      table[t][b] = search.input_token(b);
      std::vector<int> prefix;
      for (int p = 0; p <= t; ++p) prefix.push_back(table[p][search.ancestry(b)[p]]);
      EXPECT_EQ(prefix[0], kStart);
      const auto row = ToyLogits(prefix);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    search.Advance(logits.data());
    if (t > 1000) {
      ADD_FAILURE() << "search does not end";
      break;
    }
  }
  return search.Results();
}

// Sum of log-probabilities of `tokens` under the toy model, with the forced EOS counting 0.
double ToyLogProb(const std::vector<int>& tokens, int max_new_tokens) {
  std::vector<int> prefix = {kStart};
  double sum = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto logits = ToyLogits(prefix);
    ops::LogSoftmax(logits.data(), kVocab);
    if (static_cast<int>(i) != max_new_tokens - 1) sum += logits[tokens[i]];
    prefix.push_back(tokens[i]);
  }
  return sum;
}

// A forced first token (a multilingual model's target language): every hypothesis starts with
// it, it costs nothing (ToyLogProb of the rest, with the forced token counting 0), and it counts
// in the beam's length; the rest of the search is the search from that prefix.
TEST(SearchTest, ForcedFirstTokenStartsEveryHypothesisAtNoCost) {
  constexpr int kForced = 3;
  for (int beam_size : {1, 4}) {
    SearchOptions o;
    o.beam_size = beam_size;
    o.num_hypotheses = beam_size;
    o.max_new_tokens = 30;
    o.forced_bos_id = kForced;
    const auto hyps = RunToy(o);
    ASSERT_EQ(static_cast<int>(hyps.size()), beam_size);
    for (const Hypothesis& h : hyps) {
      ASSERT_GE(h.tokens.size(), 2u);
      EXPECT_EQ(h.tokens.front(), kForced) << "beam " << beam_size;
      std::vector<int> prefix = {kStart, kForced};
      double sum = 0;  // the log-probability of the tokens after the forced one
      for (size_t i = 1; i < h.tokens.size(); ++i) {
        auto logits = ToyLogits(prefix);
        ops::LogSoftmax(logits.data(), kVocab);
        if (static_cast<int>(i) != o.max_new_tokens - 1) sum += logits[h.tokens[i]];
        prefix.push_back(h.tokens[i]);
      }
      const double expected = beam_size == 1 ? sum : sum / static_cast<double>(h.tokens.size());
      EXPECT_NEAR(h.score, expected, 1e-4) << "beam " << beam_size;
    }
  }
}

TEST(SearchTest, GreedyFollowsTheArgmaxAndScoresLogProbs) {
  SearchOptions o;
  o.beam_size = 1;
  o.max_new_tokens = 50;
  const auto hyps = RunToy(o);
  ASSERT_EQ(hyps.size(), 1u);
  std::vector<int> prefix = {kStart};
  for (int token : hyps[0].tokens) {
    auto logits = ToyLogits(prefix);
    logits[kStart] = -INFINITY;
    EXPECT_EQ(token, ops::ArgMax(logits.data(), kVocab));
    EXPECT_NE(token, kStart) << "a banned id was generated";
    prefix.push_back(token);
  }
  EXPECT_NEAR(hyps[0].score, ToyLogProb(hyps[0].tokens, o.max_new_tokens), 1e-5);
}

// Greedy without scores: where ArgMaxOnly, the argmax of the logits over the ids not in
// ExcludedNow() (banned ids; EOS before min_new_tokens) given to AdvanceToArgMax takes the tokens
// that Advance takes on the rows; the score is 0.
// Without scores every greedy step can be taken from the argmax alone, forced steps (the forced
// BOS, a prefix, the forced EOS at the length limit) included: the same tokens as from the rows.
TEST(SearchTest, ArgMaxOnlyStepsEqualRowSteps) {
  struct Case {
    size_t min_new_tokens;
    int forced_bos_id;
    std::vector<int> prefix;
  };
  for (const Case& c : {Case{0, -1, {}}, Case{3, -1, {}}, Case{0, 2, {}}, Case{0, -1, {3, 1}},
                        Case{2, -1, {4, 3}}}) {
    SearchOptions o;
    o.beam_size = 1;
    o.max_new_tokens = 12;
    o.min_new_tokens = static_cast<int>(c.min_new_tokens);
    o.forced_bos_id = c.forced_bos_id;
    o.prefix = c.prefix;
    const auto rows = RunToy(o);
    o.scores = false;
    Search search(o, ToyVocab());
    std::vector<int> prefix = {kStart};
    int argmax_steps = 0;
    while (!search.done()) {
      auto logits = ToyLogits(prefix);
      ASSERT_TRUE(search.ArgMaxOnly()) << "step " << search.step();
      std::vector<int> excluded;
      search.ExcludedNow(&excluded);
      EXPECT_EQ(std::count(excluded.begin(), excluded.end(), kEos),
                prefix.size() <= c.min_new_tokens + c.prefix.size() ? 1 : 0);
      for (int id : excluded) logits[id] = -INFINITY;
      search.AdvanceToArgMax(static_cast<int>(ops::ArgMax(logits.data(), kVocab)));
      ++argmax_steps;
      prefix.push_back(search.StablePrefix().back());  // greedy: every token so far
    }
    const auto hyps = search.Results();
    ASSERT_EQ(hyps.size(), 1u);
    EXPECT_EQ(hyps[0].tokens, rows[0].tokens) << "min_new_tokens " << c.min_new_tokens;
    EXPECT_EQ(hyps[0].score, 0.0f);
    EXPECT_EQ(argmax_steps, static_cast<int>(hyps[0].tokens.size()));
  }
  // The forced EOS: a limit the toy's sentences reach.
  SearchOptions o;
  o.max_new_tokens = 2;
  o.scores = false;
  Search limited(o, ToyVocab());
  while (!limited.done()) {
    ASSERT_TRUE(limited.ArgMaxOnly());
    EXPECT_EQ(limited.ForcedWithoutRow(), limited.step() == 1);
    limited.AdvanceToArgMax(kVocab - 2);  // an allowed id that is never EOS
  }
  EXPECT_EQ(limited.Results()[0].tokens, (std::vector<int>{kVocab - 2, kEos}));

  o = SearchOptions();  // greedy, scores wanted
  EXPECT_FALSE(Search(o, ToyVocab()).ArgMaxOnly());
  o.scores = false;
  EXPECT_TRUE(Search(o, ToyVocab()).ArgMaxOnly());
  o.token_scores = true;
  EXPECT_FALSE(Search(o, ToyVocab()).ArgMaxOnly());
  o.token_scores = false;
  o.forced_bos_id = 2;
  o.beam_size = 4;  // beam search needs every log-probability, even at a forced step
  EXPECT_FALSE(Search(o, ToyVocab()).ArgMaxOnly());
}

TEST(SearchTest, LengthLimitForcesEos) {
  for (int beams : {1, 3}) {
    SearchOptions o;
    o.beam_size = beams;
    o.max_new_tokens = 2;
    o.num_hypotheses = beams;
    for (const Hypothesis& h : RunToy(o)) {
      ASSERT_LE(h.tokens.size(), 2u);
      EXPECT_EQ(h.tokens.back(), kEos);
    }
  }
}

TEST(SearchTest, BeamNBestIsSortedAndScoredLikeHuggingFace) {
  for (float penalty : {1.0f, 0.6f, 2.0f}) {
    SearchOptions o;
    o.beam_size = 4;
    o.num_hypotheses = 4;
    o.max_new_tokens = 30;
    o.length_penalty = penalty;
    const auto hyps = RunToy(o);
    ASSERT_EQ(hyps.size(), 4u);
    for (size_t i = 0; i < hyps.size(); ++i) {
      if (i > 0) {
        EXPECT_GE(hyps[i - 1].score, hyps[i].score);
      }
      const auto& tokens = hyps[i].tokens;
      EXPECT_EQ(tokens.back(), kEos);
      for (int t : tokens) EXPECT_NE(t, kStart);
      const double expected = ToyLogProb(tokens, o.max_new_tokens) /
                              std::pow(static_cast<double>(tokens.size()), penalty);
      EXPECT_NEAR(hyps[i].score, expected, 1e-4) << "hypothesis " << i;
    }
  }
}

// A banned id with the largest logit is never chosen, and still counts in the normaliser
// (Hugging Face bans after log_softmax): the fused greedy and beam paths handle it.
TEST(SearchTest, ABannedIdWithTheLargestLogitIsSkippedButNormalises) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 9.0f};  // kStart (5) is banned
  std::vector<float> log_probs = row;
  ops::LogSoftmax(log_probs.data(), kVocab);

  SearchOptions greedy;
  greedy.max_new_tokens = 10;
  Search g(greedy, ToyVocab());
  std::vector<float> logits = row;
  g.Advance(logits.data());
  ASSERT_FALSE(g.done());
  EXPECT_EQ(g.input_token(0), 1);
  std::vector<float> eos(kVocab, -5.0f);
  eos[kEos] = 5.0f;
  std::vector<float> eos_log_probs = eos;
  ops::LogSoftmax(eos_log_probs.data(), kVocab);
  g.Advance(eos.data());
  ASSERT_TRUE(g.done());
  EXPECT_EQ(g.Results()[0].tokens, (std::vector<int>{1, kEos}));
  EXPECT_NEAR(g.Results()[0].score, double{log_probs[1]} + eos_log_probs[kEos], 1e-6);

  // Beam 2, two tokens at most: the second step is the forced EOS (log-probability 0).
  SearchOptions beam;
  beam.beam_size = 2;
  beam.num_hypotheses = 2;
  beam.max_new_tokens = 2;
  Search b(beam, ToyVocab());
  logits = row;
  b.Advance(logits.data());
  ASSERT_EQ(b.active_beams(), 2);
  EXPECT_EQ(b.input_token(0), 1);
  EXPECT_EQ(b.input_token(1), 3);
  std::vector<float> next(2 * kVocab, 0.0f);
  b.Advance(next.data());
  ASSERT_TRUE(b.done());
  const auto hyps = b.Results();
  ASSERT_EQ(hyps.size(), 2u);
  EXPECT_EQ(hyps[0].tokens, (std::vector<int>{1, kEos}));
  EXPECT_EQ(hyps[1].tokens, (std::vector<int>{3, kEos}));
  EXPECT_NEAR(hyps[0].score, log_probs[1] / 2.0, 1e-6);
  EXPECT_NEAR(hyps[1].score, log_probs[3] / 2.0, 1e-6);
}

TEST(SearchTest, NumHypothesesIsClampedToTheBeam) {
  SearchOptions o;
  o.beam_size = 2;
  o.num_hypotheses = 9;
  o.max_new_tokens = 20;
  EXPECT_EQ(RunToy(o).size(), 2u);
}

TEST(SamplingTest, TopKOfOneIsGreedy) {
  SearchOptions greedy;
  greedy.max_new_tokens = 40;
  SearchOptions sample = greedy;
  sample.sampling.temperature = 1.0f;
  sample.sampling.top_k = 1;
  sample.sampling.seed = 5;
  EXPECT_EQ(RunToy(sample)[0].tokens, RunToy(greedy)[0].tokens);
}

TEST(SamplingTest, TheSameSeedGivesTheSameSample) {
  SearchOptions o;
  o.max_new_tokens = 40;
  o.sampling.temperature = 2.0f;
  o.sampling.seed = 77;
  const auto a = RunToy(o)[0].tokens;
  EXPECT_EQ(RunToy(o)[0].tokens, a);
  bool differs = false;
  for (uint64_t seed = 1; seed < 20 && !differs; ++seed) {
    o.sampling.seed = seed;
    differs = RunToy(o)[0].tokens != a;
  }
  EXPECT_TRUE(differs) << "20 seeds, one sample: the seed is ignored";
}

// First-token frequencies over many draws follow softmax(logits / T) restricted to the top-p set.
TEST(SamplingTest, FrequenciesFollowTheWarpedDistribution) {
  const std::vector<float> logits = ToyLogits({kStart});
  for (auto [temperature, top_p] : {std::pair{1.0f, 1.0f}, {0.5f, 1.0f}, {1.0f, 0.7f}}) {
    std::vector<double> p(kVocab, 0.0);
    std::vector<std::pair<double, int>> order;
    double total = 0;
    for (int i = 0; i < kVocab; ++i) {
      if (i == kStart) continue;  // banned
      p[i] = std::exp(logits[i] / temperature);
      total += p[i];
      order.push_back({p[i], i});
    }
    std::sort(order.rbegin(), order.rend());
    double kept = 0;
    std::vector<bool> in(kVocab, false);
    for (auto [q, i] : order) {
      if (kept >= top_p * total) break;
      kept += q;
      in[i] = true;
    }
    std::vector<int> counts(kVocab, 0);
    const int draws = 20000;
    for (int n = 0; n < draws; ++n) {
      SearchOptions o;
      o.max_new_tokens = 2;  // (1 would force EOS at the first step)
      o.sampling.temperature = temperature;
      o.sampling.top_p = top_p;
      o.sampling.seed = 1000 + n;
      std::vector<float> row = logits;
      Search free_search(o, ToyVocab());
      free_search.Advance(row.data());
      ++counts[free_search.done() ? free_search.Results()[0].tokens[0]
                                  : free_search.input_token(0)];
    }
    for (int i = 0; i < kVocab; ++i) {
      const double expected = in[i] ? p[i] / kept : 0.0;
      EXPECT_NEAR(counts[i] / double(draws), expected, 0.015)
          << "token " << i << " T " << temperature << " top_p " << top_p;
    }
  }
}

// AdvanceFromSummary against Advance on the same rows, in lockstep: the same tokens, beams and
// score bits, whether the summaries decide a step or leave it to the rows. Rows of 2,500 ids
// (three softmax blocks) with near-ties among the largest logits, the banned id sometimes the
// largest, with and without min_new_tokens.
TEST(SearchTest, SummaryStepsEqualRowSteps) {
  constexpr int kWide = 2500, kBanned = 7, kWideEos = 2;
  SearchVocab vocab;
  vocab.vocab_size = kWide;
  vocab.eos_id = kWideEos;
  vocab.forced_eos_id = kWideEos;
  vocab.banned_ids = {kBanned};
  auto row_of = [](const std::vector<int>& prefix) {
    std::mt19937_64 rng = PrefixRng(prefix, 88172645463325252ull);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> row(kWide);
    for (float& v : row) v = dist(rng);
    // Copies of one of the largest values: exact ones at high ids, one ulp below at low ids.
    // Their scores are mostly equal, and in score order the low ids come first: a top list
    // (logit order) cannot settle ties there.
    std::vector<float> sorted = row;
    std::partial_sort(sorted.begin(), sorted.begin() + 12, sorted.end(), std::greater<float>());
    const float v = sorted[rng() % 12];
    for (int j = 0; j < 6; ++j) {
      row[kWide - 1 - static_cast<int>(rng() % 500)] = v;
      row[20 + rng() % 500] = std::nextafter(v, -INFINITY);
    }
    row[kWideEos] -= 0.5f;
    if (rng() % 3 == 0) row[kBanned] = 9.0f;
    return row;
  };
  int decided = 0, undecided = 0;
  for (int run = 0; run < 8; ++run) {
    const int beam_size = std::vector<int>{1, 2, 4, 5}[run % 4];
    SearchOptions o;
    o.beam_size = beam_size;
    o.num_hypotheses = beam_size;
    o.max_new_tokens = 12;
    o.min_new_tokens = run < 4 ? 0 : 6;  // EOS banned for a while: a processor without the row
    Search by_rows(o, vocab), by_summary(o, vocab);
    std::vector<std::vector<int>> table;  // [position][slot] input token
    while (!by_rows.done()) {
      ASSERT_FALSE(by_summary.done());
      const int t = by_rows.step(), beams = by_rows.active_beams();
      ASSERT_EQ(by_summary.active_beams(), beams);
      table.emplace_back(beam_size, -1);
      std::vector<float> logits;
      for (int b = 0; b < beams; ++b) {
        ASSERT_EQ(by_summary.input_token(b), by_rows.input_token(b));
        table[t][b] = by_rows.input_token(b);
        std::vector<int> prefix;
        for (int p = 0; p <= t; ++p) {
          ASSERT_EQ(by_summary.ancestry(b)[p], by_rows.ancestry(b)[p]);
          prefix.push_back(table[p][by_rows.ancestry(b)[p]]);
        }
        const auto row = row_of(prefix);
        logits.insert(logits.end(), row.begin(), row.end());
      }
      // The summaries, block by block as the decoder makes them.
      const int k = std::max(0, by_summary.SummaryTopK());
      std::vector<ops::ArgMaxLogSumExp> stats(beams);
      std::vector<ops::ScoredId> top(std::max(1, beams * k));
      std::vector<int> count(beams, 0);
      for (int b = 0; b < beams; ++b) {
        const float* row = logits.data() + b * kWide;
        ops::SoftmaxAccumulator acc;
        for (int64_t i = 0; i < kWide; i += ops::kSoftmaxBlock) {
          const int64_t n = std::min<int64_t>(ops::kSoftmaxBlock, kWide - i);
          acc.Add(ops::ComputeBlockStats(row + i, n));
          if (k > 0) {
            count[b] =
                ops::UpdateTopK(row + i, n, static_cast<int32_t>(i), k, &top[b * k], count[b]);
          }
        }
        stats[b] = acc.Result();
      }
      std::vector<float> copy = logits;
      by_rows.Advance(logits.data());
      if (by_summary.SummaryTopK() >= 0 &&
          by_summary.AdvanceFromSummary(stats.data(), top.data(), count.data(), k)) {
        ++decided;
      } else {
        ++undecided;
        by_summary.Advance(copy.data(), stats.data());
      }
    }
    ASSERT_TRUE(by_summary.done());
    const auto a = by_rows.Results(), b = by_summary.Results();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].tokens, b[i].tokens) << "beam " << beam_size << " hypothesis " << i;
      EXPECT_EQ(std::memcmp(&a[i].score, &b[i].score, 4), 0) << "beam " << beam_size;
    }
  }
  // Both ways were taken: the forced last step and the ties leave steps to the rows.
  EXPECT_GT(decided, 10);
  EXPECT_GT(undecided, 4);
}

}  // namespace
}  // namespace glossa
