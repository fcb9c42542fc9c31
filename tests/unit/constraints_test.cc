// Constrained beam search (decode/constraints.h, Search with SearchOptions::constraints):
//   - ConstraintState and ConstrainedCandidates::Select against Hugging Face's ConstraintListState
//     and step_sentence_constraint (transformers 4.47.1), their expected values computed with
//     Hugging Face's own classes, quirks included;
//   - ValidateConstraints;
//   - whole searches on a toy model against Hugging Face's own _constrained_beam_search run on
//     the same toy (its logits are a hash of the prefix, exact in float32, so that both sides
//     see the same numbers): tokens, scores, n-best lists, with StablePrefix, the summary and
//     forced-step answers, and the allocations of Advance checked at every step.
#include "decode/constraints.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "decode/search.h"
#include "gtest/gtest.h"
#include "ops/ops.h"

namespace {

// Allocations while g_counting is set: Search::Advance must make none but TorchTopK's first.
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

void* Allocate(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

// Not inlined: GCC 12 would see free() in the callers and warn of uses after it that are none.
__attribute__((noinline)) void Release(void* p) noexcept { std::free(p); }

}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void operator delete(void* p) noexcept { Release(p); }
void operator delete[](void* p) noexcept { Release(p); }
void operator delete(void* p, std::size_t) noexcept { Release(p); }
void operator delete[](void* p, std::size_t) noexcept { Release(p); }
// The nothrow forms too (std::stable_sort's buffer): each new must meet its own delete.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { Release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Release(p); }

namespace glossa {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kStart = 19;  // a decoder start id no constraint uses

Constraint Phrase(std::vector<int> tokens) { return Constraint{{std::move(tokens)}}; }
Constraint Either(std::vector<std::vector<int>> alternatives) {
  return Constraint{std::move(alternatives)};
}

// The state after `tokens` (the decoder start first), as Hugging Face's reset(tokens).
ConstraintState StateAfter(const ConstraintSet& set, const std::vector<int>& tokens) {
  ConstraintState state;
  state.Reset(set);
  for (int t : tokens) state.Add(set, t);
  return state;
}

std::vector<int> AdvanceTokens(const ConstraintSet& set, const ConstraintState& state) {
  ConstraintState scratch;
  scratch.Reset(set);
  std::vector<AdvanceBank> banks;
  state.AdvanceBanks(set, &scratch, &banks);
  std::vector<int> tokens;
  for (const AdvanceBank& a : banks) tokens.push_back(a.token);
  return tokens;
}

std::vector<std::pair<int, int>> AdvanceBanks(const ConstraintSet& set,
                                              const std::vector<int>& tokens) {
  const ConstraintState state = StateAfter(set, tokens);
  ConstraintState scratch;
  scratch.Reset(set);
  std::vector<AdvanceBank> banks;
  state.AdvanceBanks(set, &scratch, &banks);
  std::vector<std::pair<int, int>> out;
  for (const AdvanceBank& a : banks) out.push_back({a.token, a.bank});
  return out;
}

// Hugging Face: after each token, (bank, completed, advance()).
struct Expect {
  int token;
  int bank;
  bool completed;
  std::vector<int> advance;
};

void CheckTrace(const std::vector<Constraint>& constraints, const std::vector<Expect>& trace) {
  const ConstraintSet set(constraints);
  ConstraintState state;
  state.Reset(set);
  for (size_t i = 0; i < trace.size(); ++i) {
    state.Add(set, trace[i].token);
    EXPECT_EQ(state.Bank(set), trace[i].bank) << "after token " << i;
    EXPECT_EQ(state.completed(), trace[i].completed) << "after token " << i;
    if (!state.completed()) {
      EXPECT_EQ(AdvanceTokens(set, state), trace[i].advance) << "after token " << i;
    }
  }
}

TEST(ConstraintStateTest, PhraseAdvancesTokenByTokenToCompletion) {
  CheckTrace({Phrase({7, 8, 9})}, {{kStart, 0, false, {7}},
                                   {7, 1, false, {8}},
                                   {8, 2, false, {9}},
                                   {9, 3, true, {}},
                                   {7, 3, true, {}}});
}

// A token that breaks a phrase sends it back to pending, and is not tried again itself: "7 7 8 9"
// does not meet "7 8 9" (Hugging Face's behaviour), "7 8 9" after it does.
TEST(ConstraintStateTest, ABrokenPhraseStartsAgainWithoutTheBreakingToken) {
  CheckTrace({Phrase({7, 8, 9})}, {{kStart, 0, false, {7}},
                                   {7, 1, false, {8}},
                                   {7, 0, false, {7}},
                                   {8, 0, false, {7}},
                                   {9, 0, false, {7}},
                                   {7, 1, false, {8}},
                                   {8, 2, false, {9}},
                                   {9, 3, true, {}}});
}

// A broken constraint goes to the end of the pending list: advance() then names the others first.
TEST(ConstraintStateTest, ABrokenConstraintGoesLastInThePendingOrder) {
  CheckTrace({Phrase({1, 2}), Phrase({3})}, {{kStart, 0, false, {1, 3}},
                                             {1, 1, false, {2}},
                                             {5, 0, false, {3, 1}},
                                             {3, 2, false, {1}},
                                             {1, 3, false, {2}},
                                             {2, 4, true, {}}});
}

TEST(ConstraintStateTest, DisjunctiveIsMetByAnyAlternative) {
  CheckTrace({Either({{4, 5}, {4, 6}, {9}})},
             {{kStart, 0, false, {4, 9}}, {4, 1, false, {5, 6}}, {6, 2, true, {}}});
  // A short alternative completes it before the longest one's length (remaining() is then 0);
  // the banks count max_seqlen (3) per constraint met.
  CheckTrace({Either({{4, 5, 6}, {9}}), Phrase({2})},
             {{kStart, 0, false, {4, 9, 2}}, {9, 3, false, {2}}, {2, 6, true, {}}});
}

// The banks Hugging Face gives the advance candidates of one hypothesis: each a stateful copy plus
// the token. In the middle of a disjunctive constraint the copies share its current_seq, so a
// later token is tried after the earlier ones' (and resets when that path has no such child).
TEST(ConstraintStateTest, AdvanceBanksShareTheDisjunctiveProgress) {
  EXPECT_EQ(AdvanceBanks(ConstraintSet({Either({{4, 5}, {4, 6, 7}})}), {kStart, 4}),
            (std::vector<std::pair<int, int>>{{5, 3}, {6, 0}}));
  const ConstraintSet branches({Either({{6, 9, 3}, {6, 13, 2}, {6, 9, 4}})});
  EXPECT_EQ(AdvanceBanks(branches, {kStart, 6}),
            (std::vector<std::pair<int, int>>{{9, 2}, {13, 0}}));
  EXPECT_EQ(AdvanceBanks(branches, {kStart, 6, 9}),
            (std::vector<std::pair<int, int>>{{3, 3}, {4, 0}}));
  EXPECT_EQ(AdvanceBanks(ConstraintSet({Either({{1, 2, 3}, {1, 2, 4}, {1, 5}}), Phrase({8, 8})}),
                         {kStart, 1}),
            (std::vector<std::pair<int, int>>{{2, 2}, {5, 0}}));
  // Not in the middle of one: every pending constraint's first tokens, each from a fresh copy.
  EXPECT_EQ(
      AdvanceBanks(ConstraintSet({Phrase({1, 2}), Phrase({3}), Either({{4, 5}, {6}})}), {kStart}),
      (std::vector<std::pair<int, int>>{{1, 1}, {3, 2}, {4, 1}, {6, 2}}));
}

TEST(ConstraintSetTest, SizesTheAdvanceLists) {
  const ConstraintSet set({Phrase({1, 2}), Phrase({3}), Either({{4, 5}, {6}, {7, 1, 1, 1}})});
  EXPECT_EQ(set.size(), 3);
  EXPECT_EQ(set.max_seqlen(), 4);
  EXPECT_EQ(set.max_advance(), 5);  // 1 + 1 + 3 first tokens
  const ConstraintSet deep({Either({{1, 2}, {1, 3}, {1, 4}, {1, 5}})});
  EXPECT_EQ(deep.max_advance(), 4);  // after the shared first token
}

// ConstrainedCandidates::Select's order against Hugging Face's (candidates: the top-k ones, then
// the advance ones).
std::vector<int> Select(const std::vector<int>& banks, const std::vector<float>& scores, int top_k,
                        int beams) {
  ConstrainedCandidates candidates;
  candidates.Reserve(static_cast<int>(banks.size()));
  for (size_t i = 0; i < banks.size(); ++i) {
    candidates.Add({scores[i], 0, static_cast<int>(i), banks[i]});
  }
  return candidates.Select(top_k, beams);
}

TEST(ConstrainedCandidatesTest, BanksTakeTurnsBestFirst) {
  EXPECT_EQ(Select({0, 0, 1, 0, 1, 2}, {-1.0f, -1.5f, -2.0f, -2.5f, -3.0f, -10.0f}, 4, 4),
            (std::vector<int>{5, 2, 0, 4}));
}

// bank * 100 + score: a score below -100 sinks a candidate below a lower bank, yet it keeps its
// turn as the first of its bank.
TEST(ConstrainedCandidatesTest, OrderIsBankTimesHundredPlusScore) {
  EXPECT_EQ(Select({0, 0, 0, 0, 1}, {-5.0f, -6.0f, -7.0f, -8.0f, -120.0f}, 4, 4),
            (std::vector<int>{0, 4, 1, 2}));
  EXPECT_EQ(Select({0, 1, 0, 0, 1, 1}, {-5.0f, -99.0f, -6.0f, -7.0f, -120.0f, -101.0f}, 4, 4),
            (std::vector<int>{1, 0, 4, 5}));
}

TEST(ConstrainedCandidatesTest, WithoutAdvanceCandidatesTheTopKStayAsTheyAre) {
  EXPECT_EQ(Select({0, 2, 1, 0}, {-1.0f, -2.0f, -3.0f, -4.0f}, 4, 4),
            (std::vector<int>{0, 1, 2, 3}));
}

// Beyond 16 candidates torch.sort's order of equal values is introsort's, not a stable one.
TEST(ConstrainedCandidatesTest, TiesBeyondSixteenFollowTorchSort) {
  std::vector<int> banks = {0, 0, 0, 0};
  std::vector<float> scores = {-1.0f, -1.25f, -1.5f, -2.0f};
  for (int i = 0; i < 10; ++i) {
    banks.push_back(2);
    scores.push_back(-kInf);
  }
  for (float s : {-3.0f, -kInf, -3.0f, -kInf, -4.0f, -kInf, -3.0f, -kInf, -4.0f, -kInf}) {
    banks.push_back(1);
    scores.push_back(s);
  }
  EXPECT_EQ(Select(banks, scores, 4, 24),
            (std::vector<int>{20, 0, 23, 13, 16, 1,  21, 12, 14, 2, 19, 11,
                              22, 3, 17, 10, 18, 15, 9,  8,  7,  6, 5,  4}));
  EXPECT_EQ(
      Select(std::vector<int>(20, 1),
             {-2.0f, -1.0f, -2.0f, -1.0f, -3.0f, -2.0f, -1.0f, -2.0f, -3.0f, -1.0f,
              -2.0f, -2.0f, -1.0f, -3.0f, -2.0f, -1.0f, -2.0f, -3.0f, -1.0f, -2.0f},
             4, 20),
      (std::vector<int>{1, 3, 18, 6, 15, 9, 12, 19, 0, 16, 14, 11, 10, 7, 5, 2, 13, 8, 17, 4}));
}

TEST(ValidateConstraintsTest, RefusesWhatHuggingFaceRefuses) {
  SearchVocab vocab;
  vocab.vocab_size = 20;
  SearchOptions o;
  o.beam_size = 1;
  EXPECT_TRUE(ValidateConstraints(o, vocab).ok()) << "no constraints: greedy is fine";
  o.constraints = {Phrase({3}), Either({{1, 2}, {1, 3}, {4}})};
  auto refused = [&](const char* words) {
    const absl::Status status = ValidateConstraints(o, vocab);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << words;
    EXPECT_NE(std::string(status.message()).find(words), std::string::npos) << status;
  };
  refused("beam_size >= 2");
  o.beam_size = 4;
  EXPECT_TRUE(ValidateConstraints(o, vocab).ok());
  o.sampling.temperature = 0.7f;
  refused("sampling");
  o.sampling.temperature = 0.0f;
  o.constraints = {Phrase({3}), Constraint{}};
  refused("constraint 1 has no alternative");
  o.constraints = {Either({{1}, {}})};
  refused("alternative 1 has no token");
  o.constraints = {Phrase({20})};
  refused("token id 20 is outside the vocabulary [0, 20)");
  o.constraints = {Phrase({2}), Phrase({-1})};
  refused("constraint 1: token id -1");
  o.constraints = {Either({{1, 2}, {1}})};
  refused("alternative 1 starts alternative 0");
  o.constraints = {Either({{5, 6}, {1, 2}, {5, 6}})};
  refused("alternative 0 equals alternative 2");
}

// The toy model: vocabulary 20, EOS 0, decoder start 19 (banned). Its logits are a hash of the
// prefix (the decoder start first), in [0, 8) with 17 fractional bits (exact in float32), EOS
// lowered by eos_bias; Hugging Face's side computes the same function.
constexpr int kVocab = 20, kEos = 0;

std::vector<float> ToyLogits(const std::vector<int>& prefix, float eos_bias) {
  uint64_t h = 1469598103934665603ull;
  for (int t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) {
    uint64_t x =
        (h ^ (static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    logits[i] = static_cast<float>(x >> 44) / 131072.0f;
  }
  logits[kEos] -= eos_bias;
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

struct Settings {
  int beams;
  int num_hypotheses;
  float length_penalty;
  bool early_stopping;
  int forced_bos;
  float repetition_penalty;
  int no_repeat_ngram;
  int min_new_tokens;
  float eos_bias;
};

struct Expected {
  std::vector<int> tokens;
  float score;
};

struct ToyCase {
  const char* name;
  std::vector<Constraint> constraints;
  int max_new_tokens;
  std::vector<int> prefix;  // target prefix
  Settings settings;
  std::vector<Expected> expected;  // Hugging Face's sequences (without the decoder start), scores
};

void PrintTo(const ToyCase& c, std::ostream* os) { *os << c.name; }

SearchOptions ToyOptions(const ToyCase& c, bool token_scores) {
  SearchOptions o;
  o.beam_size = c.settings.beams;
  o.num_hypotheses = c.settings.num_hypotheses;
  o.max_new_tokens = c.max_new_tokens;
  o.length_penalty = c.settings.length_penalty;
  o.early_stopping = c.settings.early_stopping;
  o.forced_bos_id = c.settings.forced_bos;
  o.prefix = c.prefix;
  o.repetition_penalty = c.settings.repetition_penalty;
  o.no_repeat_ngram_size = c.settings.no_repeat_ngram;
  o.min_new_tokens = c.settings.min_new_tokens;
  o.token_scores = token_scores;
  o.constraints = c.constraints;
  return o;
}

// Runs the search as the engine does (one row per active beam, a forced step without rows),
// with the toy rebuilding each beam's prefix through its ancestry as the KV cache would. Checks
// at every step what the engine relies on; counts the allocations of Advance.
std::vector<Hypothesis> RunToy(const ToyCase& c, bool token_scores, int64_t* allocations) {
  const SearchOptions options = ToyOptions(c, token_scores);
  EXPECT_TRUE(ValidateConstraints(options, ToyVocab()).ok());
  Search search(options, ToyVocab());
  std::vector<std::vector<int>> table;  // [position][slot] input token
  std::vector<std::vector<int>> stable;
  *allocations = 0;
  while (!search.done() && search.step() < 1000) {
    const int t = search.step();
    EXPECT_EQ(search.SummaryTopK(), -1) << "step " << t;
    EXPECT_FALSE(search.ArgMaxOnly()) << "step " << t;
    EXPECT_EQ(search.ForcedWithoutRow(), !token_scores && t < search.prefix_length()) << t;
    table.emplace_back(options.beam_size, -1);
    std::vector<float> logits;
    for (int b = 0; b < search.active_beams(); ++b) {
      EXPECT_EQ(search.ancestry(b)[t], b);
      table[t][b] = search.input_token(b);
      std::vector<int> prefix;
      for (int p = 0; p <= t; ++p) prefix.push_back(table[p][search.ancestry(b)[p]]);
      const auto row = ToyLogits(prefix, c.settings.eos_bias);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    g_allocations = 0;
    g_counting = true;
    if (search.ForcedWithoutRow()) {
      search.AdvanceForced();
    } else {
      search.Advance(logits.data());
    }
    g_counting = false;
    *allocations += g_allocations;
    stable.push_back(search.StablePrefix());
    EXPECT_EQ(search.StablePrefixLength(), stable.back().size());
  }
  EXPECT_TRUE(search.done());
  std::vector<Hypothesis> results = search.Results();
  if (results.empty()) {
    ADD_FAILURE() << "no hypothesis";
    return results;
  }
  for (const auto& prefix : stable) {
    EXPECT_TRUE(results[0].tokens.size() >= prefix.size() &&
                std::equal(prefix.begin(), prefix.end(), results[0].tokens.begin()))
        << "StablePrefix was not a prefix of the result";
  }
  return results;
}

class HuggingFaceToyTest : public ::testing::TestWithParam<ToyCase> {};

TEST_P(HuggingFaceToyTest, MatchesHuggingFace) {
  const ToyCase& c = GetParam();
  for (bool token_scores : {false, true}) {
    int64_t allocations = 0;
    const std::vector<Hypothesis> ours = RunToy(c, token_scores, &allocations);
    // The only allocation: TorchTopK's pairs, at the first tie.
    EXPECT_LE(allocations, 1) << "Advance allocated";
    ASSERT_EQ(ours.size(), c.expected.size());
    for (size_t n = 0; n < ours.size(); ++n) {
      EXPECT_EQ(ours[n].tokens, c.expected[n].tokens) << "n-best " << n;
      if (std::isinf(c.expected[n].score)) {
        EXPECT_EQ(ours[n].score, c.expected[n].score) << "n-best " << n;
      } else {
        EXPECT_NEAR(ours[n].score, c.expected[n].score, 1e-5) << "n-best " << n;
      }
      if (!token_scores) continue;
      // Each token's raw log-probability under the toy, the prefix's included.
      ASSERT_EQ(ours[n].token_scores.size(), ours[n].tokens.size());
      std::vector<int> prefix = {kStart};
      for (size_t i = 0; i < ours[n].tokens.size(); ++i) {
        std::vector<float> row = ToyLogits(prefix, c.settings.eos_bias);
        ops::LogSoftmax(row.data(), row.size());
        EXPECT_NEAR(ours[n].token_scores[i], row[ours[n].tokens[i]], 1e-5) << n << " " << i;
        prefix.push_back(ours[n].tokens[i]);
      }
    }
  }
}

// Hugging Face's answers: _constrained_beam_search of transformers 4.47.1 (its
// ConstrainedBeamSearchScorer, NoBadWords / RepetitionPenalty / NoRepeatNGram / MinNewTokens /
// ForcedBOS / ForcedEOS processors, MaxLengthCriteria) on this toy, batch 1. -inf: the
// hypotheses of the fallback or of the forced EOS step's -inf candidates, kept as Hugging Face
// keeps them.
const ToyCase kToyCases[] = {
    {"OneToken",
     {{{{7}}}},
     /*max_new_tokens=*/12,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 7, 17, 8, 14, 10, 7, 16, 11, 16, 0}, -0.9446427822113037f}}},
    {"Phrase",
     {{{{3, 8, 5}}}},
     /*max_new_tokens=*/15,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 3, 8, 5, 0}, -1.9889975786209106f}}},
    {"TwoPhrases",
     {{{{4}}}, {{{11, 2}}}},
     /*max_new_tokens=*/15,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 4, 11, 10, 8, 12, 6, 7, 16, 16, 6, 1, 11, 2, 0}, -1.6756412982940674f}}},
    {"EitherWithASharedPrefix",
     {{{{6, 9}, {6, 13, 2}, {15}}}},
     /*max_new_tokens=*/15,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{15, 15, 16, 11, 4, 18, 16, 1, 4, 1, 2, 4, 11, 17, 0}, -1.0530505180358887f}}},
    {"DisjunctiveBranches",
     {{{{6, 9, 3}, {6, 13, 2}, {6, 9, 4}}}, {{{8}}}},
     /*max_new_tokens=*/16,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{15, 8, 6, 11, 8, 3, 11, 18, 16, 16, 12, 12, 6, 9, 3, 0}, -2.2551348209381104f}}},
    {"ForcedFirstToken",
     {{{{5}}}, {{{12, 14}}}},
     /*max_new_tokens=*/12,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/17, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{17, 10, 5, 15, 17, 5, 10, 1, 4, 12, 14, 0}, -1.9913784265518188f}}},
    {"TooShortToMeetThem",
     {{{{3, 4, 5, 6, 7}}}, {{{9, 10, 11}}}},
     /*max_new_tokens=*/6,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/4, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{15, 9, 10, 11, 13, 3}, -kInf},
      {{15, 9, 10, 11, 3, 4}, -kInf},
      {{9, 10, 11, 3, 4, 5}, -kInf},
      {{15, 9, 10, 11, 13, 11}, -kInf}}},
    {"NBestLengthPenaltyEarlyStopping",
     {{{{2}}}, {{{10}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/4, /*length_penalty=*/0.5f, /*early_stopping=*/true,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 7, 17, 8, 14, 10, 7, 16, 11, 16, 1, 2, 0}, -4.113248348236084f},
      {{7, 18, 7, 17, 8, 14, 10, 18, 6, 16, 15, 7, 2, 0}, -4.721070766448975f},
      {{7, 18, 7, 17, 8, 14, 10, 18, 6, 16, 15, 7, 2, 11}, -kInf},
      {{7, 18, 7, 17, 8, 14, 10, 18, 6, 16, 15, 7, 2, 14}, -kInf}}},
    {"NBestLongerLengthPenalty",
     {{{{2, 12}}}, {{{10}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/3, /*length_penalty=*/2.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 2, 17, 8, 13, 7, 10, 13, 7, 3, 2, 12, 0}, -0.12735441327095032f},
      {{7, 18, 2, 17, 8, 13, 7, 10, 13, 7, 3, 11, 6, 2}, -kInf},
      {{7, 18, 2, 17, 8, 13, 7, 10, 13, 7, 3, 11, 6, 14}, -kInf}}},
    {"ManyConstraints",
     {{{{1}}}, {{{2}}}, {{{3}}}, {{{4}}}, {{{5}}}, {{{6}}}},
     /*max_new_tokens=*/16,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/2, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{15, 2, 5, 6, 1, 1, 14, 5, 3, 9, 7, 14, 10, 14, 4, 0}, -1.2651126384735107f},
      {{15, 2, 5, 6, 1, 1, 14, 5, 3, 9, 7, 10, 18, 2, 4, 0}, -1.3049033880233765f}}},
    {"ManyConstraintsForcedFirstToken",
     {{{{1}}}, {{{2}}}, {{{3}}}, {{{4}}}, {{{5}}}, {{{6}}}},
     /*max_new_tokens=*/16,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/4, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/18, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{18, 10, 4, 5, 12, 8, 3, 11, 15, 17, 2, 7, 16, 1, 6, 0}, -1.477033019065857f},
      {{18, 10, 4, 5, 12, 8, 3, 11, 15, 17, 2, 7, 16, 14, 11, 1}, -kInf},
      {{18, 10, 4, 5, 12, 8, 3, 11, 15, 17, 2, 7, 16, 14, 11, 14}, -kInf},
      {{18, 10, 4, 5, 12, 8, 3, 11, 15, 17, 2, 7, 16, 14, 1, 6}, -kInf}}},
    {"TargetPrefix",
     {{{{5, 6}}}},
     /*max_new_tokens=*/12,
     /*prefix=*/{8, 3},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{8, 3, 8, 11, 11, 2, 5, 13, 16, 5, 1, 5, 6, 0}, -1.9504480361938477f}}},
    {"MetByThePrefix",
     {{{{7}}}},
     /*max_new_tokens=*/12,
     /*prefix=*/{7},
     {/*beams=*/4, /*num_hypotheses=*/4, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 7, 17, 8, 14, 10, 7, 16, 11, 16, 1, 0}, -0.9152660965919495f},
      {{7, 18, 7, 17, 8, 14, 10, 18, 6, 16, 15, 7, 0}, -0.9189130663871765f},
      {{7, 18, 7, 17, 8, 14, 10, 7, 16, 11, 16, 11, 0}, -0.9216341376304626f},
      {{7, 18, 7, 17, 8, 14, 10, 7, 16, 11, 6, 18, 0}, -0.9486656188964844f}}},
    {"RepetitionPenaltyAndNgrams",
     {{{{4}}}, {{{9}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.3f, /*no_repeat_ngram=*/2, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 2, 17, 8, 13, 1, 5, 4, 6, 10, 15, 9, 0}, -1.4191417694091797f}}},
    {"MinNewTokens",
     {{{{4, 4}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/1, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/5,
      /*eos_bias=*/1.0f},
     {{{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 4, 4, 0}, -1.8176329135894775f}}},
    {"LikelyEos",
     {{{{13}}}, {{{16, 1}}}},
     /*max_new_tokens=*/20,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/4, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/-1.5f},
     {{{13, 14, 16, 5, 14, 4, 10, 16, 1, 0}, -1.2081917524337769f},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 16, 13, 1, 14, 9, 2, 16, 1, 0},
       -1.8214792013168335f},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 16, 13, 1, 14, 9, 2, 1, 16, 1}, -kInf},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 16, 13, 1, 14, 9, 2, 14, 16, 1}, -kInf}}},
    {"BeamsOfTwo",
     {{{{3, 3}}}, {{{12}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/2, /*num_hypotheses=*/2, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{12, 3, 3, 10, 14, 1, 9, 15, 3, 15, 2, 9, 6, 0}, -1.703916311264038f},
      {{12, 3, 3, 10, 14, 1, 9, 15, 3, 15, 2, 9, 5, 0}, -1.7225210666656494f}}},
    {"StartsWithTheDecoderStart",
     {{{{19, 7}}}, {{{3}}}},
     /*max_new_tokens=*/12,
     /*prefix=*/{},
     {/*beams=*/4, /*num_hypotheses=*/2, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{7, 18, 7, 17, 2, 15, 17, 14, 4, 15, 3, 0}, -1.4250236749649048f},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 3}, -kInf}}},
    {"BeamsOfSix",
     {{{{6, 9}, {6, 13, 2}, {15}}}, {{{11}}}},
     /*max_new_tokens=*/14,
     /*prefix=*/{},
     {/*beams=*/6, /*num_hypotheses=*/6, /*length_penalty=*/1.0f, /*early_stopping=*/false,
      /*forced_bos=*/-1, /*repetition_penalty=*/1.0f, /*no_repeat_ngram=*/0, /*min_new_tokens=*/0,
      /*eos_bias=*/1.0f},
     {{{15, 15, 16, 11, 4, 18, 16, 1, 4, 8, 8, 16, 17, 0}, -1.0463835000991821f},
      {{15, 15, 16, 11, 4, 18, 16, 1, 4, 1, 2, 4, 11, 0}, -1.0570932626724243f},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 16, 13, 18}, -kInf},
      {{13, 14, 16, 5, 14, 4, 10, 13, 9, 14, 8, 16, 13, 17}, -kInf},
      {{15, 15, 16, 11, 4, 18, 16, 1, 4, 1, 2, 4, 11, 1}, -kInf},
      {{15, 15, 16, 11, 4, 18, 16, 1, 4, 1, 2, 4, 11, 8}, -kInf}}},
};

INSTANTIATE_TEST_SUITE_P(Toy, HuggingFaceToyTest, ::testing::ValuesIn(kToyCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glossa
