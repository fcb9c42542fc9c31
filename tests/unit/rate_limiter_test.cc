// LibreTranslate's --req-limit: a sliding minute per client.
#include "server/common/rate_limiter.h"

#include <string>

#include "gtest/gtest.h"

namespace glossa::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

TEST(RateLimiterTest, AllowsThatManyAMinuteSlidingPerKey) {
  RateLimiter limiter(3);
  EXPECT_TRUE(limiter.Allow("a", kStart));
  EXPECT_TRUE(limiter.Allow("a", kStart + absl::Seconds(10)));
  EXPECT_TRUE(limiter.Allow("a", kStart + absl::Seconds(20)));
  EXPECT_FALSE(limiter.Allow("a", kStart + absl::Seconds(30)));  // refused: not counted
  EXPECT_TRUE(limiter.Allow("b", kStart + absl::Seconds(30)));   // another client
  EXPECT_FALSE(limiter.Allow("a", kStart + absl::Seconds(59)));
  EXPECT_TRUE(limiter.Allow("a", kStart + absl::Seconds(60)));   // the first has left the window
  EXPECT_FALSE(limiter.Allow("a", kStart + absl::Seconds(61)));
  EXPECT_TRUE(limiter.Allow("a", kStart + absl::Seconds(71)));
}

TEST(RateLimiterTest, NoLimitAtZero) {
  RateLimiter limiter(0);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(limiter.Allow("a", kStart));
}

TEST(RateLimiterTest, ManyClientsStayBounded) {
  RateLimiter limiter(1, /*max_keys=*/100);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(limiter.Allow("client " + std::to_string(i), kStart + absl::Milliseconds(i)));
  }
  // Within 100 keys, some clients were forgotten (a tenth at a time, in key order); "client
  // 999", among the last in that order, is still remembered.
  EXPECT_FALSE(limiter.Allow("client 999", kStart + absl::Seconds(2)));
  // A minute on, every window is empty again.
  EXPECT_TRUE(limiter.Allow("client 999", kStart + absl::Seconds(62)));
}

TEST(RateLimiterTest, KeysCountByTheirFirstBytes) {
  RateLimiter limiter(1);
  const std::string prefix(RateLimiter::kMaxKeyBytes, 'k');
  EXPECT_TRUE(limiter.Allow(prefix + "a", kStart));
  EXPECT_FALSE(limiter.Allow(prefix + "b", kStart));  // the same key: a longer one buys nothing
  EXPECT_TRUE(limiter.Allow(prefix.substr(1) + "b", kStart));
}

}  // namespace
}  // namespace glossa::server
