#include "base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpusched {
namespace {

TEST(FakeClock, AdvancesOnlyWhenTold) {
  FakeClock clock(100);
  EXPECT_EQ(clock.NowMs(), 100);
  clock.AdvanceMs(7);
  EXPECT_EQ(clock.NowMs(), 107);
  clock.SetMs(200);
  EXPECT_EQ(clock.NowMs(), 200);
}

TEST(FakeClock, AutoAdvanceSleepMovesTime) {
  FakeClock clock(0, /*auto_advance_on_sleep=*/true);
  clock.SleepMs(10);
  clock.SleepMs(15);
  EXPECT_EQ(clock.NowMs(), 25);
}

TEST(FakeClock, SleeperWakesWhenAnotherThreadAdvances) {
  FakeClock clock(0);
  TimeMs woke_at = -1;
  std::thread sleeper([&] {
    clock.SleepMs(50);
    woke_at = clock.NowMs();
  });
  while (clock.sleepers() == 0) std::this_thread::yield();
  clock.AdvanceMs(20);  // not yet
  EXPECT_EQ(clock.sleepers(), 1);
  clock.AdvanceMs(30);
  sleeper.join();
  EXPECT_EQ(woke_at, 50);
}

// Issue 37: the wall reading steps alone; monotonic time, sleepers and SteadyWallClock do not.
TEST(FakeClock, Issue37_WallStepsLeaveMonotonicTimeAlone) {
  FakeClock clock(1'000);
  SteadyWallClock steady(clock);
  clock.StepWallMs(-3'600'000);
  EXPECT_EQ(clock.NowMs(), 1'000 - 3'600'000);
  EXPECT_EQ(clock.MonoMs(), 1'000);
  EXPECT_EQ(steady.NowMs(), 1'000);
  clock.AdvanceMs(500);
  clock.StepWallMs(+7'200'000);
  EXPECT_EQ(clock.NowMs(), 1'500 + 3'600'000);
  EXPECT_EQ(steady.NowMs(), 1'500);  // the wall time of its start plus monotonic time since
  EXPECT_EQ(steady.MonoMs(), 1'500);
}

TEST(RealClock, Issue37_MonotonicReadingNeverGoesBack) {
  RealClock clock;
  TimeMs last = clock.MonoMs();
  for (int i = 0; i < 1000; ++i) {
    const TimeMs now = clock.MonoMs();
    EXPECT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace gpusched
