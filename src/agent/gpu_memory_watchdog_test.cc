// The GPU-memory watchdog: a task above its share on one of its GPUs for the grace period is
// stopped, once, with the reason; a dip below the share restarts the grace.

#include "agent/gpu_memory_watchdog.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

TEST(MemoryWatchdogTest, StopsATaskThatStaysAboveItsShareForTheGrace) {
  MemoryWatchdog dog(30'000);
  const TaskKey a{7, 1}, b{8, 1};
  const std::map<TaskKey, TaskShare> tasks = {{a, {{0, 1}, {500, 500}}}, {b, {{2}, {1000}}}};
  std::map<TaskKey, std::map<int, MiB>> used = {{a, {{0, 400}, {1, 700}}}, {b, {{2, 1000}}}};
  EXPECT_TRUE(dog.Observe(tasks, used, 0).empty());       // over since 0
  EXPECT_TRUE(dog.Observe(tasks, used, 29'999).empty());  // not for the whole grace yet
  const auto stops = dog.Observe(tasks, used, 30'000);
  ASSERT_EQ(stops.size(), 1u);  // b sits exactly at its share: allowed
  EXPECT_EQ(stops[0].task, a);
  EXPECT_EQ(stops[0].reason, "exceeded its GPU memory share: 700 MiB of 500 MiB on GPU 1 for 30s");
  EXPECT_TRUE(dog.Observe(tasks, used, 60'000).empty());  // once
}

TEST(MemoryWatchdogTest, ADipBelowTheShareRestartsTheGrace) {
  MemoryWatchdog dog(10'000);
  const TaskKey a{7, 1};
  const std::map<TaskKey, TaskShare> tasks = {{a, {{0}, {500}}}};
  EXPECT_TRUE(dog.Observe(tasks, {{a, {{0, 600}}}}, 0).empty());
  EXPECT_TRUE(dog.Observe(tasks, {{a, {{0, 100}}}}, 5'000).empty());
  EXPECT_TRUE(dog.Observe(tasks, {{a, {{0, 600}}}}, 6'000).empty());
  EXPECT_TRUE(dog.Observe(tasks, {{a, {{0, 600}}}}, 15'999).empty());
  EXPECT_EQ(dog.Observe(tasks, {{a, {{0, 600}}}}, 16'000).size(), 1u);
}

}  // namespace
}  // namespace gpusched::agent
