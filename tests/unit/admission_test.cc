// The admission policy on its own (engine/admission.h): hand-built queues and batch loads, times
// chosen by the test. No model, no engine, no threads.
#include "engine/admission.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"

namespace glossa {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest() {
    options_.max_active_sequences = 8;
    options_.max_active_rows = 64;
    options_.max_encoder_tokens = 4096;
    options_.kv_budget_blocks = 100;
    options_.batch_min_share = 0.0;
    options_.interactive_hold = absl::Seconds(2);
  }

  // Queues a job named `name` of `sources` sources of `tokens` tokens each, submitted at kT0.
  std::shared_ptr<QueuedJob> Enqueue(const std::string& name, int sources, Lane lane,
                                     absl::Time deadline = absl::InfiniteFuture(), int beam = 1,
                                     int tokens = 10) {
    auto job = std::make_shared<QueuedJob>(std::vector<int>(sources, tokens));
    job->lane = lane;
    job->deadline = deadline;
    job->submitted = kT0;
    job->beam_size = beam;
    job->kv_blocks = 1;
    names_[job.get()] = name;
    AdmissionPolicy(options_).Enqueue(job, state_);
    return job;
  }

  // One admission; the sources taken, in order, as "<job name><source index>" joined by spaces.
  std::string Admit(const BatchLoad& load = {}, absl::Time now = kT0) {
    std::vector<Admitted> admitted;
    AdmissionPolicy(options_).Admit(load, now, state_, &admitted);
    std::string order;
    for (const Admitted& a : admitted) {
      if (!order.empty()) order += " ";
      order += names_[a.job.get()] + std::to_string(a.index);
    }
    return order;
  }

  void Reset() { state_ = AdmissionState(); }

  AdmissionOptions options_;
  AdmissionState state_;
  std::map<const QueuedJob*, std::string> names_;
};

constexpr Lane kInteractive = Lane::kInteractive;
constexpr Lane kBatch = Lane::kBatch;

TEST_F(AdmissionTest, EnqueueCountsTheSourcesAndRemembersTheLatestInteractiveJob) {
  Enqueue("b", 3, kBatch);
  EXPECT_EQ(state_.last_interactive, absl::InfinitePast()) << "a batch job is not interactive";
  Enqueue("i", 2, kInteractive);
  EXPECT_EQ(state_.last_interactive, kT0);
  EXPECT_EQ(state_.pending_sources, 5);
  EXPECT_EQ(state_.pending_by_lane[0], 2);
  EXPECT_EQ(state_.pending_by_lane[1], 3);
  EXPECT_FALSE(state_.empty());
  state_.Clear();
  EXPECT_TRUE(state_.empty());
  EXPECT_EQ(state_.pending_sources, 0);
  EXPECT_EQ(state_.pending_by_lane[1], 0);
}

TEST_F(AdmissionTest, InteractiveWorkGoesBeforeBatchWorkQueuedEarlier) {
  options_.interactive_hold = absl::ZeroDuration();  // batch work may fill what is left
  Enqueue("b", 2, kBatch);
  Enqueue("i", 2, kInteractive);
  EXPECT_EQ(Admit(), "i0 i1 b0 b1");
  EXPECT_TRUE(state_.empty());
}

TEST_F(AdmissionTest, EarliestDeadlineFirstThenJobsWithoutADeadlineInArrivalOrder) {
  Enqueue("none", 1, kInteractive);
  Enqueue("late", 1, kInteractive, kT0 + absl::Seconds(60));
  Enqueue("soon", 1, kInteractive, kT0 + absl::Seconds(30));
  Enqueue("other", 1, kInteractive);
  Enqueue("tie", 1, kInteractive, kT0 + absl::Seconds(30));  // after "soon": arrival order
  EXPECT_EQ(Admit(), "soon0 tie0 late0 none0 other0");
}

TEST_F(AdmissionTest, WithoutDeadlineAdmissionJobsGoInArrivalOrder) {
  options_.deadline_admission = false;
  Enqueue("none", 1, kInteractive);
  Enqueue("late", 1, kInteractive, kT0 + absl::Seconds(60));
  Enqueue("soon", 1, kInteractive, kT0 + absl::Seconds(30));
  EXPECT_EQ(Admit(), "none0 late0 soon0");
}

TEST_F(AdmissionTest, EachPassTakesOneSourceFromEachWaitingJob) {
  auto a = Enqueue("a", 3, kInteractive);
  Enqueue("b", 2, kInteractive);
  Enqueue("c", 1, kInteractive);
  EXPECT_EQ(Admit(), "a0 b0 c0 a1 b1 a2");
  EXPECT_TRUE(state_.empty());
  EXPECT_EQ(state_.pending_sources, 0);
  EXPECT_EQ(a->next_source, 3);

  Reset();
  options_.max_active_sequences = 4;
  a = Enqueue("a", 3, kInteractive);
  auto b = Enqueue("b", 2, kInteractive);
  Enqueue("c", 1, kInteractive);
  EXPECT_EQ(Admit(), "a0 b0 c0 a1");
  EXPECT_EQ(a->next_source, 2);
  EXPECT_EQ(b->next_source, 1);
  EXPECT_EQ(state_.pending_sources, 2);
  EXPECT_EQ(state_.pending_by_lane[0], 2);
  ASSERT_EQ(state_.lanes[0].size(), 2u) << "the finished job leaves the queue";
  EXPECT_EQ(state_.lanes[0][0], a);
  EXPECT_EQ(state_.lanes[0][1], b);
  EXPECT_EQ(state_.kv_reserved_blocks, 4);
}

TEST_F(AdmissionTest, TheBatchReserveIsAdmittedAheadOfWaitingInteractiveWork) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.25;  // one sequence of four
  Enqueue("b", 5, kBatch);
  Enqueue("i", 5, kInteractive);
  EXPECT_EQ(Admit(), "b0 i0 i1 i2");

  // A batch sequence already decodes: the reserve is met, interactive work takes the rest.
  Reset();
  Enqueue("b", 5, kBatch);
  Enqueue("i", 5, kInteractive);
  BatchLoad load;
  load.sequences = 2;
  load.batch_lane_sequences = 1;
  load.rows = 2;
  EXPECT_EQ(Admit(load), "i0 i1");

  // The reserve rounds up: 0.3 × 4 is two sequences.
  Reset();
  options_.batch_min_share = 0.3;
  Enqueue("b", 5, kBatch);
  Enqueue("i", 5, kInteractive);
  EXPECT_EQ(Admit(), "b0 b1 i0 i1");
}

TEST_F(AdmissionTest, WhileInteractiveWorkIsPresentBatchWorkStaysAtItsShare) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.25;
  auto queue = [&] {
    Reset();
    Enqueue("b", 6, kBatch);
    Enqueue("i", 1, kInteractive);  // submitted at kT0
  };
  queue();
  EXPECT_EQ(Admit({}, kT0 + absl::Seconds(1)), "b0 i0") << "within interactive_hold";
  queue();
  EXPECT_EQ(Admit({}, kT0 + absl::Seconds(2)), "b0 i0 b1 b2") << "the hold has passed";
  queue();
  BatchLoad elsewhere;
  elsewhere.interactive_sequences = 1;  // interactive sequences decode in another worker
  EXPECT_EQ(Admit(elsewhere, kT0 + absl::Seconds(10)), "b0 i0");
}

TEST_F(AdmissionTest, AWorkerThatWouldIdleTakesBatchWorkDespiteInteractiveWork) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.0;  // no reserve
  Enqueue("b", 6, kBatch);
  state_.last_interactive = kT0;  // interactive work queued just now, all of it admitted
  EXPECT_EQ(Admit({}, kT0), "b0 b1 b2 b3");
  Reset();
  Enqueue("b", 6, kBatch);
  state_.last_interactive = kT0;
  BatchLoad busy;
  busy.sequences = 1;
  busy.rows = 1;
  EXPECT_EQ(Admit(busy, kT0), "") << "the worker has interactive work to decode";
}

TEST_F(AdmissionTest, AdmissionStopsAtTheFirstSourceThatDoesNotFit) {
  options_.max_active_rows = 6;
  options_.interactive_hold = absl::ZeroDuration();
  BatchLoad load;
  load.sequences = 1;
  load.rows = 2;
  Enqueue("wide", 1, kInteractive, absl::InfiniteFuture(), /*beam=*/5);  // 2 + 5 > 6 rows
  Enqueue("narrow", 1, kInteractive);
  Enqueue("b", 1, kBatch);
  EXPECT_EQ(Admit(load), "") << "no source overtakes the one that does not fit";
  EXPECT_EQ(state_.pending_sources, 3);
  EXPECT_EQ(state_.kv_reserved_blocks, 0);
  load.rows = 1;  // 1 + 5 fits
  EXPECT_EQ(Admit(load), "wide0");
  EXPECT_EQ(Admit(), "narrow0 b0");

  // The batch lane's reserve does not fit: interactive work waits behind it.
  Reset();
  options_.batch_min_share = 0.5;
  options_.max_active_sequences = 4;
  Enqueue("b", 1, kBatch, absl::InfiniteFuture(), /*beam=*/5);
  Enqueue("i", 1, kInteractive);
  load.rows = 2;
  EXPECT_EQ(Admit(load), "");
}

TEST_F(AdmissionTest, EachBudgetBoundsAnAdmission) {
  options_.max_active_sequences = 2;
  Enqueue("a", 5, kInteractive);
  EXPECT_EQ(Admit(), "a0 a1") << "sequences";

  Reset();
  options_.max_active_sequences = 8;
  options_.max_active_rows = 7;
  Enqueue("a", 5, kInteractive, absl::InfiniteFuture(), /*beam=*/2);
  BatchLoad load;
  load.sequences = 1;
  load.rows = 1;
  EXPECT_EQ(Admit(load), "a0 a1 a2") << "rows: 1 + 3 × 2";

  Reset();
  options_.max_active_rows = 64;
  options_.max_encoder_tokens = 20;
  Enqueue("a", 5, kInteractive);  // 10 tokens each
  EXPECT_EQ(Admit(), "a0 a1") << "encoder tokens of one admission";

  Reset();
  options_.max_encoder_tokens = 4096;
  options_.kv_budget_blocks = 3;
  state_.kv_reserved_blocks = 1;
  Enqueue("a", 5, kInteractive);  // one block per source
  EXPECT_EQ(Admit(), "a0 a1") << "KV blocks";
  EXPECT_EQ(state_.kv_reserved_blocks, 3);
}

TEST_F(AdmissionTest, AnEmptyBatchAdmitsBeyondTheBudgetsExceptTheKvBudget) {
  options_.max_active_rows = 2;
  options_.max_encoder_tokens = 5;
  Enqueue("big", 2, kInteractive, absl::InfiniteFuture(), /*beam=*/4, /*tokens=*/9);
  EXPECT_EQ(Admit(), "big0") << "alone, beyond the row and token budgets";
  BatchLoad one;
  one.sequences = 1;
  one.rows = 4;
  EXPECT_EQ(Admit(one), "");

  Reset();
  options_.kv_budget_blocks = 5;
  auto job = Enqueue("huge", 1, kInteractive);
  job->kv_blocks = 6;
  EXPECT_EQ(Admit(), "") << "the KV budget holds even for an empty batch";
}

TEST_F(AdmissionTest, EndedJobsAreDroppedFromTheQueue) {
  auto ended = Enqueue("ended", 3, kInteractive);
  Enqueue("b", 1, kBatch);
  ended->done.store(true);
  options_.interactive_hold = absl::ZeroDuration();
  EXPECT_EQ(Admit(), "b0");
  EXPECT_TRUE(state_.empty());
  EXPECT_EQ(state_.pending_sources, 0);
  EXPECT_EQ(state_.pending_by_lane[0], 0);
}

TEST_F(AdmissionTest, HeadMayStartWhenTheHeadEndedOrFitsTheKvBudget) {
  options_.kv_budget_blocks = 2;
  const AdmissionPolicy policy(options_);
  EXPECT_FALSE(policy.HeadMayStart(state_)) << "nothing queued";
  auto head = Enqueue("a", 1, kBatch);
  EXPECT_TRUE(policy.HeadMayStart(state_));
  state_.kv_reserved_blocks = 1;
  EXPECT_TRUE(policy.HeadMayStart(state_)) << "1 + 1 blocks fit 2";
  state_.kv_reserved_blocks = 2;
  EXPECT_FALSE(policy.HeadMayStart(state_));
  head->done.store(true);
  EXPECT_TRUE(policy.HeadMayStart(state_)) << "an ended head is for Admit to drop";
}

TEST(BatchPauseTest, BatchRowsPauseWhileInteractiveRowsDecodeUnlessBelowTheirShare) {
  AdmissionOptions options;
  options.batch_min_share = 0.25;
  const AdmissionPolicy policy(options);
  EXPECT_FALSE(policy.PauseBatchRows(/*interactive_decoding=*/false, 0.9));
  EXPECT_TRUE(policy.PauseBatchRows(true, 0.9));
  EXPECT_TRUE(policy.PauseBatchRows(true, 0.25));
  EXPECT_FALSE(policy.PauseBatchRows(true, 0.2)) << "the batch lane fell below its share";
}

TEST(BatchPauseTest, TheTimeShareIsAMovingAverageOverAboutASecond) {
  const double keep = std::exp(-0.5);  // a step of half the window
  EXPECT_DOUBLE_EQ(AdmissionPolicy::NextBatchTimeShare(0.0, absl::Milliseconds(500), true),
                   1.0 - keep);
  EXPECT_DOUBLE_EQ(AdmissionPolicy::NextBatchTimeShare(0.8, absl::Milliseconds(500), false),
                   0.8 * keep);
  EXPECT_DOUBLE_EQ(AdmissionPolicy::NextBatchTimeShare(0.4, absl::ZeroDuration(), true), 0.4);
}

// Interactive rows decode at every step: batch rows step just often enough to keep their share.
TEST(BatchPauseTest, UnderAContinuousInteractiveLoadBatchRowsKeepTheirShareOfTime) {
  AdmissionOptions options;
  options.batch_min_share = 0.25;
  const AdmissionPolicy policy(options);
  double share = 0.0;
  int batch_steps = 0;
  const int kSteps = 400;  // 100 ms each
  for (int i = 0; i < kSteps; ++i) {
    const bool pause = policy.PauseBatchRows(true, share);
    batch_steps += pause ? 0 : 1;
    share = AdmissionPolicy::NextBatchTimeShare(share, absl::Milliseconds(100), !pause);
  }
  EXPECT_GE(batch_steps, kSteps * 0.2);
  EXPECT_LE(batch_steps, kSteps * 0.35);
  EXPECT_NEAR(share, 0.25, 0.1);
}

// Figures of an estimate that has seen enough: a length ratio of 2 (so 0.75 × 2 × (n - 1) + 1
// steps for a sentence of n tokens), half a second a step up to 3 rows, a second from 4 rows on.
DecodeEstimate::Figures Learnt() {
  DecodeEstimate::Figures f;
  f.step_seconds[0] = f.step_seconds[1] = 0.5;
  f.step_count[0] = f.step_count[1] = DecodeEstimate::kMinSteps;
  f.step_seconds[2] = 1.0;
  f.step_count[2] = DecodeEstimate::kMinSteps;
  f.ratio = 2.0;
  f.sentences = DecodeEstimate::kMinSentences;
  return f;
}

class EarlyRefusalTest : public ::testing::Test {
 protected:
  // A job of sources of 31, 5 and 11 tokens, due at kT0 + `left`.
  std::shared_ptr<QueuedJob> Job(absl::Duration left) {
    auto job = std::make_shared<QueuedJob>(std::vector<int>{31, 5, 11});
    job->deadline = kT0 + left;
    job->max_new_tokens = 100;
    return job;
  }
  absl::Status Check(const QueuedJob& job, int64_t rows = 1,
                     const DecodeEstimate::Figures& figures = Learnt()) {
    return AdmissionPolicy(options_).CheckCanFinish(figures, job, rows, kT0);
  }
  AdmissionOptions options_;
};

TEST_F(EarlyRefusalTest, AJobThatCanFinishIsKept) {
  auto job = Job(absl::Seconds(30));  // the 31-token source: 46 steps of 0.5 s = 23 s
  EXPECT_TRUE(Check(*job).ok());
  job = Job(absl::Seconds(23));
  EXPECT_TRUE(Check(*job).ok()) << "just in time";
}

TEST_F(EarlyRefusalTest, AJobThatCannotFinishIsRefused) {
  auto job = Job(absl::Seconds(23) - absl::Milliseconds(1));
  const absl::Status status = Check(*job);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot finish before its deadline"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("about 23000 ms"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("22999 ms are left"));
  job = Job(absl::Seconds(30));
  EXPECT_EQ(Check(*job, /*rows=*/4).code(), absl::StatusCode::kDeadlineExceeded)
      << "at 4 rows a step takes 1 s: 46 s";
}

TEST_F(EarlyRefusalTest, OnlyTheSourcesNotYetAdmittedCount) {
  auto job = Job(absl::Seconds(10));
  EXPECT_FALSE(Check(*job).ok());
  job->next_source = 1;  // the longest left is the last, of 11 tokens: 16 steps of 0.5 s = 8 s
  EXPECT_TRUE(Check(*job).ok());
  job->deadline = kT0 + absl::Seconds(5);
  EXPECT_FALSE(Check(*job).ok()) << "the next source needs 3.5 s, but the last one 8 s";
  job->next_source = 3;
  job->deadline = kT0 + absl::Milliseconds(1);
  EXPECT_TRUE(Check(*job).ok()) << "nothing left to admit";
}

TEST_F(EarlyRefusalTest, TheOutputLimitAndThePrefixCount) {
  auto job = Job(absl::Seconds(10));
  job->max_new_tokens = 20;  // 20 steps of 0.5 s
  EXPECT_TRUE(Check(*job).ok());
  job->prefix_tokens = 1;  // 21 steps
  EXPECT_FALSE(Check(*job).ok());
}

TEST_F(EarlyRefusalTest, NoRefusalWithoutAnEstimateADeadlineOrTheOption) {
  auto job = Job(absl::Milliseconds(1));
  ASSERT_FALSE(Check(*job).ok());
  DecodeEstimate::Figures few_sentences = Learnt();
  few_sentences.sentences = DecodeEstimate::kMinSentences - 1;
  EXPECT_TRUE(Check(*job, 1, few_sentences).ok()) << "no length ratio yet";
  DecodeEstimate::Figures few_steps = Learnt();
  few_steps.step_count[0] = DecodeEstimate::kMinSteps - 1;
  EXPECT_TRUE(Check(*job, 1, few_steps).ok()) << "no step time at 1 row or below";
  EXPECT_TRUE(Check(*job, 1, DecodeEstimate::Figures()).ok());
  job->deadline = absl::InfiniteFuture();
  EXPECT_TRUE(Check(*job).ok()) << "no deadline";
  job = Job(absl::Milliseconds(1));
  options_.deadline_admission = false;
  EXPECT_TRUE(Check(*job).ok()) << "deadline_admission off";
}

}  // namespace
}  // namespace glossa
