// MemoryBudget: reservations grow within the limit, give everything back when destroyed, and
// tell "try later" (others hold too much) from "never fits" (over the limit alone).
#include "server/jobs/memory_budget.h"

#include <utility>

#include "gtest/gtest.h"

namespace glossa::server {
namespace {

TEST(MemoryBudgetTest, ReservationsShareTheLimitAndGiveItBack) {
  MemoryBudget budget(100, "--limit");
  {
    MemoryBudget::Reservation a = budget.Start();
    ASSERT_TRUE(a.Grow(60).ok());
    MemoryBudget::Reservation b = budget.Start();
    const absl::Status later = b.Grow(50);
    EXPECT_TRUE(absl::IsResourceExhausted(later)) << later;
    EXPECT_NE(later.message().find("--limit"), absl::string_view::npos) << later;
    EXPECT_EQ(b.held(), 0);  // nothing held on an error
    ASSERT_TRUE(b.Grow(40).ok());
    EXPECT_EQ(budget.used(), 100);
  }
  EXPECT_EQ(budget.used(), 0);
}

TEST(MemoryBudgetTest, OverTheLimitAloneNeverFits) {
  MemoryBudget budget(100, "--limit");
  MemoryBudget::Reservation a = budget.Start();
  ASSERT_TRUE(a.Grow(30).ok());
  const absl::Status never = a.Grow(80);
  EXPECT_TRUE(absl::IsInvalidArgument(never)) << never;
  EXPECT_EQ(a.held(), 30);
  EXPECT_EQ(budget.used(), 30);
}

TEST(MemoryBudgetTest, AMovedReservationIsReleasedOnce) {
  MemoryBudget budget(100, "--limit");
  MemoryBudget::Reservation a = budget.Start();
  ASSERT_TRUE(a.Grow(70).ok());
  MemoryBudget::Reservation b = std::move(a);
  EXPECT_EQ(b.held(), 70);
  a.Release();  // moved from: holds nothing
  EXPECT_EQ(budget.used(), 70);
  b.Release();
  EXPECT_EQ(budget.used(), 0);
}

}  // namespace
}  // namespace glossa::server
