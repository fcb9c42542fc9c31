#include "server/batch/client/client.h"

#include <gtest/gtest.h>

#include "server/batch/progress.h"

namespace glossa::batch {
namespace {

TEST(BatchClientTest, ErrorScopes) {
  EXPECT_EQ(ScopeOf(grpc::StatusCode::UNAVAILABLE), ErrorScope::kRetry);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::RESOURCE_EXHAUSTED), ErrorScope::kRetry);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::DEADLINE_EXCEEDED), ErrorScope::kRetry);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::INVALID_ARGUMENT), ErrorScope::kSegment);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::INTERNAL), ErrorScope::kSegment);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::NOT_FOUND), ErrorScope::kJob);
  EXPECT_EQ(ScopeOf(grpc::StatusCode::CANCELLED), ErrorScope::kJob);
  EXPECT_EQ(CodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(CodeName(grpc::StatusCode::OK), "OK");
}

TEST(BatchClientTest, BackoffDoublesUpToTheCap) {
  RetryPolicy p;
  p.initial_backoff = absl::Milliseconds(250);
  p.max_backoff = absl::Seconds(2);
  EXPECT_EQ(Backoff(p, 1, 1.0), absl::Milliseconds(250));
  EXPECT_EQ(Backoff(p, 2, 1.0), absl::Milliseconds(500));
  EXPECT_EQ(Backoff(p, 4, 1.0), absl::Seconds(2));
  EXPECT_EQ(Backoff(p, 60, 1.0), absl::Seconds(2));
  EXPECT_EQ(Backoff(p, 1, 1.2), absl::Milliseconds(300));
}

TEST(BatchClientTest, SplitTargets) {
  EXPECT_EQ(SplitTargets("a:1"), std::vector<std::string>{"a:1"});
  EXPECT_EQ(SplitTargets("a:1,b:2, c:3"), (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(SplitTargets("dns:///glossa.default.svc:50051"),
            std::vector<std::string>{"dns:///glossa.default.svc:50051"});
  EXPECT_EQ(SplitTargets("ipv4:10.0.0.1:5,10.0.0.2:5"),
            std::vector<std::string>{"ipv4:10.0.0.1:5,10.0.0.2:5"});
  EXPECT_TRUE(SplitTargets("").empty());
}

TEST(BatchProgressTest, Lines) {
  ProgressCounts c;
  c.done = 1200;
  c.total = 5000;
  c.this_run = 1000;
  c.tokens = 30000;
  c.seconds = 10;
  EXPECT_EQ(FormatProgress(c),
            "1200/5000 segments (24.0%), 100.0 segments/s, 3000 tokens/s, ETA 38s");
  c.failed = 2;
  EXPECT_EQ(FormatSummary(c),
            "1200/5000 segments (2 failed, 1000 this run) in 10.0 s, 100.0 segments/s, "
            "3000 tokens/s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(7620), "2h07m");
  c.this_run = 0;
  EXPECT_NE(FormatProgress(c).find("ETA ?"), std::string::npos);
}

}  // namespace
}  // namespace glossa::batch
