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

}  // namespace
}  // namespace gpusched
