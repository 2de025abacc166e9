#include "dispatch/baseline_policies.h"

#include <gtest/gtest.h>

namespace gpusched::dispatch {
namespace {

std::vector<ServiceConfig> Services() {
  return {{.name = "small", .cost_time = 10, .wait_time = 5, .try_time = 1},
          {.name = "big", .cost_time = 100, .wait_time = 50, .try_time = 10}};
}

TEST(BaselinePolicyTest, RoundRobinCycles) {
  FakeClock clock;
  BaselinePolicy p(BaselineKind::kRoundRobin, 3, Services(), clock);
  for (int expected : {0, 1, 2, 0, 1}) EXPECT_EQ(p.Acquire(0)->gpu, expected);
}

TEST(BaselinePolicyTest, JoinShortestQueueTiesByLowestIndex) {
  FakeClock clock;
  BaselinePolicy p(BaselineKind::kJoinShortestQueue, 3, Services(), clock);
  Lease a = *p.Acquire(0), b = *p.Acquire(0);
  EXPECT_EQ(a.gpu, 0);
  EXPECT_EQ(b.gpu, 1);
  p.Complete(a);
  EXPECT_EQ(p.Acquire(0)->gpu, 0);  // GPU0 is empty again; GPU2 also empty, lower id wins
}

TEST(BaselinePolicyTest, LeastExpectedFinishAvoidsTheBigJob) {
  FakeClock clock;
  BaselinePolicy p(BaselineKind::kLeastExpectedFinish, 2, Services(), clock);
  EXPECT_EQ(p.Acquire(1)->gpu, 0);  // big: 100 ms of work on GPU0
  EXPECT_EQ(p.Acquire(0)->gpu, 1);  // small: 10 on GPU1
  EXPECT_EQ(p.Acquire(0)->gpu, 1);  // GPU1 has 10 left, GPU0 100: JSQ would pick GPU0
  clock.AdvanceMs(95);               // big has 5 left, the two smalls are overdue (0)
  EXPECT_EQ(p.Acquire(0)->gpu, 1);  // 0 + 10 on GPU1 < 5 + 10 on GPU0
}

TEST(BaselinePolicyTest, RandomIsSeededAndInRange) {
  FakeClock clock;
  Rng rng1(42), rng2(42);
  BaselinePolicy p1(BaselineKind::kRandom, 8, Services(), clock, &rng1);
  BaselinePolicy p2(BaselineKind::kRandom, 8, Services(), clock, &rng2);
  for (int i = 0; i < 100; ++i) {
    const int g = p1.Acquire(0)->gpu;
    EXPECT_EQ(g, p2.Acquire(0)->gpu);
    EXPECT_GE(g, 0);
    EXPECT_LT(g, 8);
  }
}

}  // namespace
}  // namespace gpusched::dispatch
