// FairShareBook on its own (issue 40): charging, factors, live groups and recalculation, on a
// fake clock with no decay, so every value is computed by hand from core/fair_share.h.

#include "core/fair_share_book.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

namespace gpusched::core {
namespace {

constexpr DurationMs kHour = 3'600'000;

class FairShareBookTest : public ::testing::Test {
 protected:
  static FairShareOptions Options() {
    FairShareOptions o;
    o.half_life_ms = 0;  // no decay: usage is plain GPU-ms
    o.recalc_ms = 60'000;
    return o;
  }
  FakeClock clock_{1'000'000};
  QuotaPolicy quotas_;
  FairShareBook book_{Options(), quotas_, clock_};
};

TEST_F(FairShareBookTest, Issue40_ChargesActiveTasksAtRecalcAndFactorsFollowUsage) {
  book_.CountLive("a", "ann", +1);
  book_.CountLive("b", "bob", +1);
  book_.StartCharging(TaskId(1), "a", "ann", 2, clock_.NowMs());
  clock_.AdvanceMs(kHour);
  book_.Recalc();
  // Team a used everything with half the shares: F = 2^(-1 / 0.5) = 0.25; ann is a's only
  // user and used all of it with all of its shares: 2^(-1) = 0.5.
  EXPECT_DOUBLE_EQ(book_.CachedFactor("a", "ann"), 0.125);
  EXPECT_DOUBLE_EQ(book_.CachedFactor("b", "bob"), 1.0);
  EXPECT_DOUBLE_EQ(book_.usage().Team("a", clock_.NowMs()), 2.0 * kHour);
  // Charged up to the recalculation, not twice: the stop adds only the time since.
  clock_.AdvanceMs(kHour);
  book_.StopCharging(TaskId(1), clock_.NowMs());
  EXPECT_DOUBLE_EQ(book_.usage().Team("a", clock_.NowMs()), 4.0 * kHour);
  clock_.AdvanceMs(kHour);
  EXPECT_DOUBLE_EQ(book_.TeamGpuMs().at("a"), 4.0 * kHour);  // stopped: no more charges
}

TEST_F(FairShareBookTest, Issue40_CachedFactorsStayUntilRecalcWhichANewcomerMakesDue) {
  book_.Recalc();
  EXPECT_FALSE(book_.RecalcDue(clock_.NowMs()));
  book_.StartCharging(TaskId(7), "a", "", 1, clock_.NowMs());
  clock_.AdvanceMs(1000);
  book_.StopCharging(TaskId(7), clock_.NowMs());
  // Usage moved but the cached factor is the last recalculation's; a fresh one sees it.
  // The only team and user: all the usage with all the shares, 2^(-1) twice.
  EXPECT_DOUBLE_EQ(book_.FactorOf("a", ""), 0.25);
  EXPECT_FALSE(book_.RecalcDue(clock_.NowMs()));
  EXPECT_DOUBLE_EQ(book_.CachedFactor("a", ""), 1.0);  // unknown at the last recalc
  EXPECT_TRUE(book_.RecalcDue(clock_.NowMs()));        // ... so one is due
  book_.Recalc();
  EXPECT_DOUBLE_EQ(book_.CachedFactor("a", ""), 0.25);
  EXPECT_FALSE(book_.RecalcDue(clock_.NowMs()));
  clock_.AdvanceMs(60'000);  // recalc_ms
  EXPECT_TRUE(book_.RecalcDue(clock_.NowMs()));
}

TEST_F(FairShareBookTest, Issue40_SharesFollowGuaranteesAndLiveGroupsTakePart) {
  TeamQuota q;
  q.team = "a";
  q.guaranteed_gpus = 3;
  ASSERT_TRUE(quotas_.Set(q).ok());
  book_.StartCharging(TaskId(1), "a", "ann", 1, clock_.NowMs());
  clock_.AdvanceMs(kHour);
  book_.StopCharging(TaskId(1), clock_.NowMs());
  // b's live task makes b a group: a has shares 3 of 4 and all the usage; ann is a's only
  // user.
  book_.CountLive("b", "bob", +1);
  const double f_team = std::pow(2.0, -1.0 / 0.75);
  EXPECT_DOUBLE_EQ(book_.FactorOf("a", "ann"), f_team * 0.5);
  EXPECT_DOUBLE_EQ(book_.FactorOf("b", "bob"), 1.0);
  // A live task of cid in a: ann's share of her team halves (2^(-1 / 0.5)).
  book_.CountLive("a", "cid", +1);
  EXPECT_DOUBLE_EQ(book_.FactorOf("a", "ann"), f_team * 0.25);
  book_.CountLive("a", "cid", -1);  // it ended: cid takes no part any more
  EXPECT_DOUBLE_EQ(book_.FactorOf("a", "ann"), f_team * 0.5);
  // A larger guarantee: shares 7 of 8.
  q.guaranteed_gpus = 7;
  ASSERT_TRUE(quotas_.Set(q).ok());
  EXPECT_DOUBLE_EQ(book_.FactorOf("a", "ann"), std::pow(2.0, -1.0 / 0.875) * 0.5);
}

TEST_F(FairShareBookTest, Issue40_RestoredUsageCountsForFactorsNotForTeamGpuMs) {
  book_.Recalc();
  book_.RestoreUsage("a", "", 4, kHour, clock_.NowMs());
  EXPECT_TRUE(book_.RecalcDue(clock_.NowMs()));
  book_.RestoreUsage("b", "", 0, kHour, clock_.NowMs());  // nothing: no GPUs
  book_.RestoreUsage("b", "", 4, 0, clock_.NowMs());      // nothing: no service
  EXPECT_DOUBLE_EQ(book_.usage().Team("a", clock_.NowMs()), 4.0 * kHour);
  EXPECT_DOUBLE_EQ(book_.usage().Team("b", clock_.NowMs()), 0.0);
  EXPECT_EQ(book_.TeamGpuMs().count("a"), 0u);
  book_.Recalc();
  EXPECT_DOUBLE_EQ(book_.CachedFactor("a", ""), 0.25);
}

TEST_F(FairShareBookTest, Issue40_TeamGpuMsCountsActiveTasksUpToNow) {
  book_.StartCharging(TaskId(1), "a", "", 2, clock_.NowMs());
  book_.StartCharging(TaskId(2), "b", "", 1, clock_.NowMs());
  clock_.AdvanceMs(1000);
  std::map<std::string, double> ms = book_.TeamGpuMs();
  EXPECT_DOUBLE_EQ(ms.at("a"), 2000);
  EXPECT_DOUBLE_EQ(ms.at("b"), 1000);
  book_.StopCharging(TaskId(3), clock_.NowMs());  // not charging: nothing
  book_.Recalc();                                   // charged up to now: the same totals
  ms = book_.TeamGpuMs();
  EXPECT_DOUBLE_EQ(ms.at("a"), 2000);
  EXPECT_DOUBLE_EQ(ms.at("b"), 1000);
}

}  // namespace
}  // namespace gpusched::core
