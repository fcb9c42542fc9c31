#include "server/batch/io/journal.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace glossa::batch {
namespace {

const nlohmann::json kJob = {{"format", "text"}, {"lines", {0, 100}}};

TEST(BatchJournalTest, CheckpointsAndFailuresRoundTrip) {
  const std::string journal = HeaderRecord(kJob) +
                              FailedRecord({3, "INVALID_ARGUMENT", "too long"}) +
                              CheckpointRecord({1, 16, 800, 700}) +
                              CheckpointRecord({17, 32, 1600, 1400}) + CompleteRecord(32, 1);
  absl::StatusOr<JournalState> state = ParseJournal(journal);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->job, kJob);
  ASSERT_EQ(state->checkpoints.size(), 2u);
  EXPECT_EQ(state->checkpoints[1].first_line, 17);
  EXPECT_EQ(state->checkpoints[1].last_line, 32);
  EXPECT_EQ(state->checkpoints[1].input_offset, 1600);
  EXPECT_EQ(state->checkpoints[1].output_offset, 1400);
  EXPECT_EQ(state->resume_line(), 32);
  ASSERT_EQ(state->failed.size(), 1u);
  EXPECT_EQ(state->failed[0].line, 3);
  EXPECT_EQ(state->failed[0].code, "INVALID_ARGUMENT");
  EXPECT_EQ(state->failed[0].message, "too long");
  EXPECT_TRUE(state->complete);
}

TEST(BatchJournalTest, HeaderOnlyMeansStartOver) {
  absl::StatusOr<JournalState> state = ParseJournal(HeaderRecord(kJob));
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->checkpoints.empty());
  EXPECT_EQ(state->resume_line(), 0);
  EXPECT_FALSE(state->complete);
}

TEST(BatchJournalTest, TornLastLineIsIgnored) {
  const std::string good = HeaderRecord(kJob) + CheckpointRecord({1, 16, 800, 700});
  const std::string torn = CheckpointRecord({17, 32, 1600, 1400});
  for (size_t cut = 0; cut < torn.size(); ++cut) {
    absl::StatusOr<JournalState> state = ParseJournal(good + torn.substr(0, cut));
    ASSERT_TRUE(state.ok()) << cut << ": " << state.status();
    EXPECT_EQ(state->resume_line(), 16) << cut;
  }
}

TEST(BatchJournalTest, FailuresWithoutTheirCheckpointAreDropped) {
  // A run killed after appending a failure but before its checkpoint, then resumed: the line
  // is translated again and its failure recorded again; it must count once.
  const std::string journal =
      HeaderRecord(kJob) + CheckpointRecord({1, 16, 800, 700}) +
      FailedRecord({20, "INVALID_ARGUMENT", "first run"}) + ResumeRecord(17, 700) +
      FailedRecord({20, "INVALID_ARGUMENT", "second run"}) + CheckpointRecord({17, 32, 1600, 1400});
  absl::StatusOr<JournalState> state = ParseJournal(journal);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->failed.size(), 1u);
  EXPECT_EQ(state->failed[0].message, "second run");
  // And a failure never followed by a checkpoint does not count.
  state = ParseJournal(HeaderRecord(kJob) + FailedRecord({5, "INTERNAL", "x"}));
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->failed.empty());
}

TEST(BatchJournalTest, NotAJournal) {
  EXPECT_FALSE(ParseJournal("").ok());
  EXPECT_FALSE(ParseJournal("hello\n").ok());
  EXPECT_FALSE(ParseJournal("{\"job\":{}}\n").ok());
}

TEST(BatchJournalTest, CorruptMiddleLineIsAnError) {
  const std::string journal = HeaderRecord(kJob) + "garbage\n" + CheckpointRecord({1, 2, 3, 4});
  EXPECT_EQ(ParseJournal(journal).status().code(), absl::StatusCode::kDataLoss);
  const std::string mistyped = HeaderRecord(kJob) + "{\"written\":\"x\"}\n" + CompleteRecord(1, 0);
  EXPECT_EQ(ParseJournal(mistyped).status().code(), absl::StatusCode::kDataLoss);
}

TEST(BatchJournalTest, WriterCreatesAndAppends) {
  const std::string path = ::testing::TempDir() + "/journal_writer_test.journal";
  {
    JournalWriter writer;
    ASSERT_TRUE(writer.Create(path, HeaderRecord(kJob)).ok());
    ASSERT_TRUE(writer.Append(CheckpointRecord({1, 10, 100, 90})).ok());
  }
  {
    JournalWriter writer;
    ASSERT_TRUE(writer.OpenForAppend(path).ok());
    ASSERT_TRUE(writer.Append(CheckpointRecord({11, 20, 200, 180}) + CompleteRecord(20, 0)).ok());
  }
  absl::StatusOr<JournalState> state = ReadJournal(path);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->resume_line(), 20);
  EXPECT_TRUE(state->complete);
  {  // Create replaces an old journal
    JournalWriter writer;
    ASSERT_TRUE(writer.Create(path, HeaderRecord(kJob)).ok());
  }
  EXPECT_EQ(ReadJournal(path)->resume_line(), 0);
  std::remove(path.c_str());
  EXPECT_EQ(ReadJournal(path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace glossa::batch
