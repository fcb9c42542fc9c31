// The engine's scheduling, driven by hand (workers = 0, RunOnce) with a fake clock: fair
// admission, budgets, deadlines, queue-wait accounting.
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "common/test_util.h"
#include "engine/engine.h"

namespace glossa {
namespace {

class FakeClock : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    const absl::Time now = now_;
    now_ += tick_;
    return now;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  // From now on every reading advances the clock by `tick` (so steps take time).
  void Tick(absl::Duration tick) {
    absl::MutexLock lock(&mu_);
    tick_ = tick;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  absl::Duration tick_;
};

struct Tracked {
  std::shared_ptr<Job> job = std::make_shared<Job>();
  bool done = false;
  JobResult result;
  Tracked(std::vector<std::vector<int>> sources, int beam) {
    job->sources = std::move(sources);
    job->search.beam_size = beam;
    job->search.max_new_tokens = 128;
    job->on_done = [this](JobResult r) {
      result = std::move(r);
      done = true;
    };
  }
};

std::vector<std::vector<int>> Sources(size_t first, size_t n) {
  const auto golden = testing::ReadGolden("greedy");
  std::vector<std::vector<int>> s;
  for (size_t i = first; i < first + n; ++i) s.push_back(golden[i].src_ids);
  return s;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveShared()) GTEST_SKIP() << "needs the shared golden data";
    options_.workers = 0;
    options_.clock = &clock_;
  }
  FakeClock clock_;
  EngineOptions options_;
};

TEST_F(SchedulerTest, AShortRequestIsNotStuckBehindALongOne) {
  options_.max_active_sequences = 4;
  Engine engine(testing::DemoModel(), options_);
  Tracked long_job(Sources(0, 40), 1), short_job(Sources(100, 1), 1);
  ASSERT_TRUE(engine.Submit(long_job.job).ok());
  ASSERT_TRUE(engine.Submit(short_job.job).ok());
  ASSERT_TRUE(engine.RunOnce());
  // The first admission took one sentence from each job, then filled up from the long one.
  EXPECT_EQ(engine.stats().active_sequences, 4);
  EXPECT_EQ(engine.stats().queued_sources, 37);
  int steps = 1;
  while (!short_job.done && steps < 300) {
    engine.RunOnce();
    ++steps;
  }
  ASSERT_TRUE(short_job.done);
  EXPECT_TRUE(short_job.result.ok());
  EXPECT_FALSE(long_job.done);
  EXPECT_GT(engine.stats().queued_sources, 0) << "the short job waited for the whole long one";
  while (engine.RunOnce()) {
  }
  ASSERT_TRUE(long_job.done);
  ASSERT_TRUE(long_job.result.ok());
  EXPECT_EQ(long_job.result->size(), 40u);
}

TEST_F(SchedulerTest, WaitingJobsAreAdmittedInArrivalOrderOneSentenceEachPerPass) {
  options_.max_active_sequences = 3;
  Engine engine(testing::DemoModel(), options_);
  Tracked a(Sources(0, 5), 1), b(Sources(10, 5), 1), c(Sources(20, 5), 1);
  for (Tracked* t : {&a, &b, &c}) ASSERT_TRUE(engine.Submit(t->job).ok());
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().active_sequences, 3);
  EXPECT_EQ(engine.stats().queued_sources, 12);  // 4 left of each: one of each was admitted
  engine.Shutdown(absl::InfinitePast());  // ends the jobs while a, b, c still exist
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SchedulerTest, TheKvBudgetBoundsWhatIsAdmitted) {
  // Room for exactly two greedy sentences of up to 128 tokens: 2 × 8 blocks.
  const ModelConfig& c = testing::DemoModel()->config();
  options_.kv_cache_bytes = 2 * 8 * KvCache::BlockFloats(c.decoder_layers, c.d_model) * 4;
  Engine engine(testing::DemoModel(), options_);
  std::vector<std::unique_ptr<Tracked>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(std::make_unique<Tracked>(Sources(i, 1), 1));
    ASSERT_TRUE(engine.Submit(jobs.back()->job).ok());
  }
  int guard = 0;
  while (engine.RunOnce() && ++guard < 2000) {
    const EngineStats s = engine.stats();
    ASSERT_LE(s.active_sequences, 2);
    ASSERT_LE(s.kv_bytes_in_use, s.kv_bytes_capacity);
  }
  for (const auto& j : jobs) EXPECT_TRUE(j->done && j->result.ok());
}

TEST_F(SchedulerTest, TheRowBudgetCountsBeams) {
  options_.max_active_rows = 8;
  Engine engine(testing::DemoModel(), options_);
  Tracked a(Sources(0, 6), 4);
  ASSERT_TRUE(engine.Submit(a.job).ok());
  int guard = 0;
  while (engine.RunOnce() && ++guard < 2000) ASSERT_LE(engine.stats().active_rows, 8);
  EXPECT_TRUE(a.done && a.result.ok());
}

TEST_F(SchedulerTest, ADeadlinePassingOnTheClockEndsTheJobAtTheNextIteration) {
  Engine engine(testing::DemoModel(), options_);
  Tracked a(Sources(0, 2), 4);
  a.job->deadline = clock_.Now() + absl::Seconds(1);
  ASSERT_TRUE(engine.Submit(a.job).ok());
  ASSERT_TRUE(engine.RunOnce());
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_FALSE(a.done);
  const int64_t steps = engine.stats().steps;
  clock_.Advance(absl::Seconds(2));
  engine.RunOnce();
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(engine.stats().steps, steps) << "a step ran for an expired job";
  EXPECT_EQ(engine.stats().active_sequences, 0);
  EXPECT_EQ(engine.stats().kv_bytes_in_use, 0);
}

TEST_F(SchedulerTest, ACancelledJobRunsNoFurtherStep) {
  Engine engine(testing::DemoModel(), options_);
  Tracked a(Sources(0, 3), 2);
  ASSERT_TRUE(engine.Submit(a.job).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.RunOnce());
  const int64_t steps = engine.stats().steps;
  a.job->Cancel();
  engine.RunOnce();
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine.stats().steps, steps);
  EXPECT_EQ(engine.stats().kv_bytes_in_use, 0);
}

TEST_F(SchedulerTest, QueueWaitIsMeasuredOnTheInjectedClock) {
  Engine engine(testing::DemoModel(), options_);
  Tracked a(Sources(0, 1), 1);
  ASSERT_TRUE(engine.Submit(a.job).ok());
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(engine.RunOnce());
  const auto wait = engine.metrics().queue_wait_seconds.Read();
  EXPECT_EQ(wait.count, 1u);
  EXPECT_DOUBLE_EQ(wait.sum, 3.0);
  engine.Shutdown(absl::InfinitePast());
}

// Interactive work waiting is admitted before batch work that arrived earlier, except for the
// batch lane's reserve (batch_min_share of the sequences), which keeps batch work going.
TEST_F(SchedulerTest, InteractiveWorkGoesFirstBatchWorkKeepsItsReserve) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.25;  // one sequence of four
  Engine engine(testing::DemoModel(), options_);
  Tracked batch(Sources(0, 20), 1), interactive(Sources(100, 6), 1);
  batch.job->lane = Lane::kBatch;
  ASSERT_TRUE(engine.Submit(batch.job).ok());
  ASSERT_TRUE(engine.Submit(interactive.job).ok());
  EXPECT_EQ(engine.stats().queued_by_lane[0], 6);
  EXPECT_EQ(engine.stats().queued_by_lane[1], 20);
  ASSERT_TRUE(engine.RunOnce());
  // One batch sentence (the reserve), then three interactive ones; no more batch.
  EXPECT_EQ(engine.stats().queued_by_lane[1], 19);
  EXPECT_EQ(engine.stats().queued_by_lane[0], 3);
  // While interactive work waits, batch work never takes more than its reserve: every freed
  // slot goes to interactive work until none is left.
  while (!interactive.done) {
    ASSERT_TRUE(engine.RunOnce());
    if (engine.stats().queued_by_lane[0] > 0) {
      EXPECT_LE(engine.stats().active_by_lane[1], 1) << "batch work overtook interactive work";
    }
  }
  ASSERT_TRUE(interactive.result.ok());
  EXPECT_FALSE(batch.done);
  // Interactive work arrived within interactive_hold: batch work stays within its share...
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_LE(engine.stats().active_by_lane[1], 1);
  // ... and fills the capacity once the hold has passed.
  clock_.Advance(options_.interactive_hold + absl::Milliseconds(1));
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().active_by_lane[1], 4);
  while (engine.RunOnce()) {
  }
  ASSERT_TRUE(batch.done);
  ASSERT_TRUE(batch.result.ok());
  EXPECT_EQ(batch.result->size(), 20u);
}

// A stream of interactive jobs that always keeps the queue busy does not starve batch work:
// its reserve keeps one sequence decoding, so it finishes while interactive work still arrives.
TEST_F(SchedulerTest, BatchWorkIsNotStarvedByAContinuousInteractiveLoad) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.25;
  Engine engine(testing::DemoModel(), options_);
  Tracked batch(Sources(0, 3), 1);
  batch.job->lane = Lane::kBatch;
  ASSERT_TRUE(engine.Submit(batch.job).ok());
  std::vector<std::unique_ptr<Tracked>> interactive;
  for (int step = 0; step < 2000 && !batch.done; ++step) {
    if (engine.stats().queued_by_lane[0] < 8) {  // interactive work always waiting
      interactive.push_back(std::make_unique<Tracked>(Sources(100 + step % 200, 1), 1));
      ASSERT_TRUE(engine.Submit(interactive.back()->job).ok());
    }
    engine.RunOnce();
    clock_.Advance(absl::Milliseconds(10));
  }
  ASSERT_TRUE(batch.done) << "batch work starved";
  EXPECT_TRUE(batch.result.ok());
  EXPECT_GT(engine.stats().queued_by_lane[0], 0);
  engine.Shutdown(absl::InfinitePast());
}

// With no reserve, batch work only fills capacity interactive work leaves idle.
TEST_F(SchedulerTest, WithoutAReserveBatchWorkWaitsForIdleCapacity) {
  options_.max_active_sequences = 2;
  options_.batch_min_share = 0.0;
  Engine engine(testing::DemoModel(), options_);
  Tracked batch(Sources(0, 2), 1), interactive(Sources(100, 4), 1);
  batch.job->lane = Lane::kBatch;
  ASSERT_TRUE(engine.Submit(batch.job).ok());
  ASSERT_TRUE(engine.Submit(interactive.job).ok());
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().queued_by_lane[1], 2);
  while (!interactive.done) {
    ASSERT_TRUE(engine.RunOnce());
    if (engine.stats().queued_by_lane[0] > 0) {
      EXPECT_EQ(engine.stats().active_by_lane[1], 0);
    }
  }
  while (engine.RunOnce()) {
  }
  EXPECT_TRUE(batch.done && batch.result.ok());
}

// While interactive sentences decode, batch sentences skip steps, except for the batch lane's
// share of the worker's time. With a clock that ticks 100 ms per reading, every step "takes" the
// same time, so the time share is the share of steps.
TEST_F(SchedulerTest, BatchWorkPausesForInteractiveWorkButKeepsItsShareOfTime) {
  options_.max_active_sequences = 4;
  options_.batch_min_share = 0.25;
  clock_.Tick(absl::Milliseconds(100));
  Engine engine(testing::DemoModel(), options_);
  Tracked batch(Sources(0, 30), 1), interactive(Sources(100, 16), 1);
  batch.job->lane = Lane::kBatch;
  ASSERT_TRUE(engine.Submit(batch.job).ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().batch_paused_steps, 0) << "nothing to pause for";
  ASSERT_TRUE(engine.Submit(interactive.job).ok());
  // Once a batch sentence ends, its slot goes to interactive work, which then decodes alone.
  int64_t steps_before;
  do {
    steps_before = engine.stats().steps;
    ASSERT_TRUE(engine.RunOnce());
  } while (engine.stats().active_by_lane[0] == 0);
  EXPECT_EQ(engine.stats().batch_paused_steps, 1) << "interactive work decodes alone at first";
  while (!interactive.done) ASSERT_TRUE(engine.RunOnce());
  ASSERT_TRUE(interactive.result.ok());
  const int64_t steps = engine.stats().steps - steps_before;
  const int64_t paused = engine.stats().batch_paused_steps;
  const double batch_share = 1.0 - static_cast<double>(paused) / static_cast<double>(steps);
  EXPECT_GE(batch_share, 0.15) << paused << " of " << steps << " steps paused batch work";
  EXPECT_LE(batch_share, 0.5) << paused << " of " << steps << " steps paused batch work";
  ASSERT_TRUE(engine.RunOnce());
  EXPECT_EQ(engine.stats().batch_paused_steps, paused) << "batch work alone again: no pause";
  while (engine.RunOnce()) {
  }
  ASSERT_TRUE(batch.done && batch.result.ok());
}

// Within a lane, jobs with earlier deadlines are admitted first; jobs without one come after.
TEST_F(SchedulerTest, EarliestDeadlineFirstWithinALane) {
  options_.max_active_sequences = 1;
  Engine engine(testing::DemoModel(), options_);
  Tracked none(Sources(0, 1), 1), late(Sources(1, 1), 1), soon(Sources(2, 1), 1);
  late.job->deadline = clock_.Now() + absl::Seconds(60);
  soon.job->deadline = clock_.Now() + absl::Seconds(30);
  std::vector<const Tracked*> order;
  for (Tracked* t : {&none, &late, &soon}) {
    auto on_done = t->job->on_done;
    t->job->on_done = [t, on_done, &order](JobResult r) {
      order.push_back(t);
      on_done(std::move(r));
    };
    ASSERT_TRUE(engine.Submit(t->job).ok());
  }
  while (engine.RunOnce()) {
  }
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], &soon);
  EXPECT_EQ(order[1], &late);
  EXPECT_EQ(order[2], &none);
}

// Deadline-aware admission. With a ticking clock, every reading of the clock takes 1 ms, so each
// iteration of the step loop takes a few ms and the engine learns a step time and a length ratio.
class DeadlineAdmissionTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    if (IsSkipped()) return;
    clock_.Tick(absl::Milliseconds(1));
    options_.max_active_sequences = 1;
  }
  // Runs enough sentences through `engine` for its estimate to have an opinion.
  static void Learn(Engine& engine) {
    Tracked warm(Sources(300, DecodeEstimate::kMinSentences), 1);
    warm.job->search.max_new_tokens = 8;  // short, one at a time: quick
    ASSERT_TRUE(engine.Submit(warm.job).ok());
    while (engine.RunOnce()) {
    }
    ASSERT_TRUE(warm.done && warm.result.ok());
    ASSERT_TRUE(engine.estimate().Estimate(20, 100, 0, 1).has_value());
  }
};

TEST_F(DeadlineAdmissionTest, ARequestThatCannotFinishIsRefusedAtSubmit) {
  Engine engine(testing::DemoModel(), options_);
  Learn(engine);
  const absl::Duration step = *engine.estimate().StepTime(1);
  EXPECT_GE(step, absl::Milliseconds(1));
  Tracked hopeless(Sources(0, 1), 1), fine(Sources(0, 1), 1);
  hopeless.job->deadline = clock_.Now() + step;  // one step for a whole sentence
  fine.job->deadline = clock_.Now() + absl::Seconds(10);
  const absl::Status refused = engine.Submit(hopeless.job);
  EXPECT_EQ(refused.code(), absl::StatusCode::kDeadlineExceeded) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("cannot finish"));
  EXPECT_FALSE(hopeless.done) << "a refused Submit calls no on_done";
  EXPECT_EQ(engine.metrics().refused_late_total.load(), 1u);
  ASSERT_TRUE(engine.Submit(fine.job).ok());
  while (engine.RunOnce()) {
  }
  EXPECT_TRUE(fine.done && fine.result.ok());
  EXPECT_EQ(engine.metrics().refused_late_total.load(), 1u);
}

TEST_F(DeadlineAdmissionTest, AWaitingRequestEndsAsSoonAsItCannotFinish) {
  options_.batch_min_share = 0;  // the batch lane waits for the interactive job to end
  Engine engine(testing::DemoModel(), options_);
  Learn(engine);
  Tracked ahead(Sources(0, 10), 1), waiting(Sources(50, 1), 1);
  ahead.job->search.max_new_tokens = 8;  // 10 × 8 steps of at least 1 ms each
  waiting.job->lane = Lane::kBatch;
  // Twice what the waiting sentence needs, far less than `ahead` takes.
  const std::optional<absl::Duration> needs = engine.estimate().Estimate(
      waiting.job->sources[0].size(), waiting.job->search.max_new_tokens, 0, 2);
  ASSERT_TRUE(needs.has_value());
  const absl::Time deadline = clock_.Now() + 2 * *needs;
  waiting.job->deadline = deadline;
  absl::Time ended;
  waiting.job->on_done = [&](JobResult r) {
    ended = clock_.Now();
    waiting.result = std::move(r);
    waiting.done = true;
  };
  ASSERT_TRUE(engine.Submit(ahead.job).ok());
  ASSERT_TRUE(engine.Submit(waiting.job).ok()) << "admitted at once, it could finish";
  while (!waiting.done && engine.RunOnce()) {
  }
  ASSERT_TRUE(waiting.done);
  EXPECT_EQ(waiting.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(ended, deadline) << "it was ended early, not when its deadline passed";
  EXPECT_EQ(engine.metrics().refused_late_total.load(), 1u);
  EXPECT_EQ(engine.metrics().expired_total.load(), 0u);
  EXPECT_FALSE(ahead.done);
  while (engine.RunOnce()) {
  }
  EXPECT_TRUE(ahead.done && ahead.result.ok());
}

TEST_F(DeadlineAdmissionTest, OffArrivalOrderAndNoEarlyRefusal) {
  options_.deadline_admission = false;
  Engine engine(testing::DemoModel(), options_);
  Learn(engine);
  // With one sequence at a time, the job with the earlier deadline waits behind the first one
  // (arrival order) and is accepted although it cannot finish: it ends when its deadline passes.
  Tracked first(Sources(0, 1), 1), hurried(Sources(1, 1), 1);
  first.job->deadline = clock_.Now() + absl::Seconds(60);
  hurried.job->deadline = clock_.Now() + absl::Milliseconds(1);
  ASSERT_TRUE(engine.Submit(first.job).ok());
  ASSERT_TRUE(engine.Submit(hurried.job).ok());
  while (engine.RunOnce()) {
  }
  ASSERT_TRUE(first.done && hurried.done);
  EXPECT_EQ(hurried.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(first.result.ok());
  EXPECT_EQ(engine.metrics().refused_late_total.load(), 0u);
  EXPECT_EQ(engine.metrics().expired_total.load(), 1u);
  // Arrival order, not deadline order, between two jobs that both can finish.
  Tracked later(Sources(2, 1), 1), sooner(Sources(3, 1), 1);
  later.job->deadline = clock_.Now() + absl::Seconds(60);
  sooner.job->deadline = clock_.Now() + absl::Seconds(30);
  ASSERT_TRUE(engine.Submit(later.job).ok());
  ASSERT_TRUE(engine.Submit(sooner.job).ok());
  while (!later.done && !sooner.done) ASSERT_TRUE(engine.RunOnce());
  EXPECT_TRUE(later.done && later.result.ok());
  EXPECT_FALSE(sooner.done) << "the job that arrived second went first";
  while (engine.RunOnce()) {
  }
  EXPECT_TRUE(sooner.done && sooner.result.ok());
}

TEST(DecodeEstimateTest, NoOpinionUntilItHasSeenEnough) {
  DecodeEstimate e;
  for (int i = 0; i < DecodeEstimate::kMinSteps; ++i) e.ObserveStep(1, absl::Milliseconds(2));
  EXPECT_FALSE(e.Estimate(11, 100, 0, 1).has_value()) << "no sentence seen yet";
  for (int i = 0; i < DecodeEstimate::kMinSentences; ++i) e.ObserveSentence(11, 20);  // ratio 2
  EXPECT_EQ(*e.LengthRatio(), 2.0);
  // 0.75 × 2 × 10 + 1 = 16 steps of 2 ms.
  EXPECT_EQ(*e.Estimate(11, 100, 0, 1), absl::Milliseconds(32));
  EXPECT_EQ(*e.Estimate(11, 5, 0, 1), absl::Milliseconds(10)) << "the output limit caps it";
  EXPECT_EQ(*e.Estimate(11, 5, 3, 1), absl::Milliseconds(16)) << "one step per prefix token";
}

TEST(DecodeEstimateTest, StepTimeComesFromTheBucketOrTheNearestSmallerOneMeasured) {
  DecodeEstimate e;
  for (int i = 0; i < DecodeEstimate::kMinSteps; ++i) {
    e.ObserveStep(3, absl::Milliseconds(4));   // bucket 2-3
    e.ObserveStep(40, absl::Milliseconds(9));  // bucket 32-63
  }
  EXPECT_FALSE(e.StepTime(1).has_value()) << "nothing measured at or below 1 row";
  EXPECT_EQ(*e.StepTime(2), absl::Milliseconds(4));
  EXPECT_EQ(*e.StepTime(20), absl::Milliseconds(4)) << "16-31 unmeasured: 2-3 is a lower bound";
  EXPECT_EQ(*e.StepTime(63), absl::Milliseconds(9));
  EXPECT_EQ(*e.StepTime(5000), absl::Milliseconds(9));
  for (int i = 0; i < 200; ++i) e.ObserveStep(40, absl::Milliseconds(5));
  EXPECT_LT(absl::ToDoubleMilliseconds(*e.StepTime(40)), 5.1) << "it follows a changed load";
}

}  // namespace
}  // namespace glossa
