#include "agent/noop_executor.h"

#include <gtest/gtest.h>

#include <future>

#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

LaunchSpec Noop(uint64_t id, DurationMs duration_ms) {
  LaunchSpec s;
  s.id = id;
  s.attempt = 1;
  s.duration_ms = duration_ms;
  return s;
}

class NoopExecutorTest : public ::testing::Test {
 protected:
  // Every deadline due by now has been processed once a task launched now with no
  // duration is reported: the timer thread handles deadlines in time order.
  void Barrier() {
    const uint64_t id = next_barrier_id_++;
    ASSERT_TRUE(executor_.Launch(Noop(id, 0)).ok());
    ASSERT_TRUE(rec_.WaitFor(id, 1));
  }

  FakeClock clock_{1'000'000};
  ExitRecorder rec_;
  NoopExecutor executor_{clock_, rec_.Callback()};
  uint64_t next_barrier_id_ = 1'000'000;
};

TEST_F(NoopExecutorTest, RunsForItsDurationOnTheClockThenExitsZero) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 500)).ok());
  EXPECT_EQ(executor_.Running(), (std::vector<TaskKey>{{1, 1}}));
  clock_.AdvanceMs(499);
  Barrier();
  EXPECT_EQ(rec_.CountOf(1, 1), 0u);
  EXPECT_EQ(executor_.Running(), (std::vector<TaskKey>{{1, 1}}));
  clock_.AdvanceMs(1);
  auto e = rec_.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 0);
  EXPECT_EQ(e->reason, "");
  EXPECT_TRUE(executor_.Running().empty());
}

// As ProcessRunner's: never neither running nor reported (process_runner_test.cc).
TEST(NoopExecutorSettlingTest, DoubleRun_ATaskStaysRunningUntilItsExitCallbackReturns) {
  FakeClock clock{1'000'000};
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  NoopExecutor executor{clock, [&](const TaskExit&) {
                          entered.set_value();
                          released.wait();
                        }};
  ASSERT_TRUE(executor.Launch(Noop(1, 0)).ok());
  entered.get_future().wait();
  EXPECT_EQ(executor.Running(), (std::vector<TaskKey>{{1, 1}}));
  release.set_value();
  EXPECT_TRUE(PollUntil([&] { return executor.Running().empty(); }));
}

TEST_F(NoopExecutorTest, WithoutDurationItExitsAtOnce) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 0)).ok());
  auto e = rec_.WaitFor(1, 1);  // the fake clock never moves
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 0);
}

TEST_F(NoopExecutorTest, KillEndsItAt137WithTheReasonAndOnlyOnce) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 10'000)).ok());
  executor_.Kill(1, 1, 5'000, "cancelled by user");
  executor_.Kill(1, 1, 5'000, "again");  // already being killed: ignored
  auto e = rec_.WaitFor(1, 1);  // at once, no grace: nothing to terminate
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 137);
  EXPECT_EQ(e->reason, "killed: cancelled by user");
  clock_.AdvanceMs(10'000);  // the original deadline passes
  Barrier();
  EXPECT_EQ(rec_.CountOf(1, 1), 1u);
}

TEST_F(NoopExecutorTest, TaskRelaunchedAfterAKillIsNotEndedByItsFirstDeadline) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 500)).ok());
  executor_.Kill(1, 1, 0, "first");
  ASSERT_TRUE(rec_.WaitFor(1, 1));
  ASSERT_TRUE(executor_.Launch(Noop(1, 2000)).ok());  // the same (id, attempt) again
  clock_.AdvanceMs(500);  // the first launch's deadline
  Barrier();
  EXPECT_EQ(rec_.CountOf(1, 1), 1u);
  EXPECT_EQ(executor_.Running(), (std::vector<TaskKey>{{1, 1}}));
  clock_.AdvanceMs(1500);
  ASSERT_TRUE(PollUntil([&] { return rec_.CountOf(1, 1) == 2; }));
}

TEST_F(NoopExecutorTest, KillOfATaskNotRunningIsIgnored) {
  executor_.Kill(7, 1, 0, "x");
  Barrier();
  EXPECT_EQ(rec_.CountOf(7, 1), 0u);
}

TEST_F(NoopExecutorTest, LaunchOfARunningTaskIsAlreadyExists) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 100)).ok());
  EXPECT_EQ(executor_.Launch(Noop(1, 0)).code(), StatusCode::kAlreadyExists);
  Barrier();  // the repeated launch's zero duration did not end it
  EXPECT_EQ(rec_.CountOf(1, 1), 0u);
  clock_.AdvanceMs(100);
  ASSERT_TRUE(rec_.WaitFor(1, 1));
}

TEST_F(NoopExecutorTest, EarlierDeadlineLaunchedLaterWakesTheTimer) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 60'000)).ok());
  ASSERT_TRUE(executor_.Launch(Noop(2, 10)).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(rec_.WaitFor(2, 1));
  EXPECT_EQ(rec_.CountOf(1, 1), 0u);
}

TEST_F(NoopExecutorTest, TensOfThousandsOfTasksEachReportedOnceInDeadlineOrder) {
  constexpr int kTasks = 20'000;
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(executor_.Launch(Noop(i + 1, 1 + (i * 7919) % 1000)).ok());
  }
  EXPECT_EQ(executor_.Running().size(), static_cast<size_t>(kTasks));
  clock_.AdvanceMs(1000);
  ASSERT_TRUE(PollUntil([&] { return rec_.exits().size() >= kTasks; }));
  const auto exits = rec_.exits();
  ASSERT_EQ(exits.size(), static_cast<size_t>(kTasks));
  std::vector<int> seen(kTasks + 1, 0);
  DurationMs previous = 0;
  for (const TaskExit& e : exits) {
    ++seen[e.id];
    const DurationMs duration = 1 + (static_cast<int>(e.id - 1) * 7919) % 1000;
    EXPECT_GE(duration, previous) << "task " << e.id << " out of deadline order";
    previous = duration;
  }
  for (int i = 1; i <= kTasks; ++i) ASSERT_EQ(seen[i], 1) << i;
  EXPECT_TRUE(executor_.Running().empty());
}

TEST(NoopExecutorRealClockTest, SustainsThousandsOfTasksPerSecond) {
  RealClock clock;
  ExitRecorder rec;
  NoopExecutor executor(clock, rec.Callback());
  constexpr int kTasks = 50'000;
  const int64_t t0 = clock.NowNs();
  for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(executor.Launch(Noop(i + 1, i % 5)).ok());
  ASSERT_TRUE(PollUntil([&] { return rec.exits().size() >= kTasks; }));
  const double secs = double(clock.NowNs() - t0) / 1e9;
  ::testing::Test::RecordProperty("tasks_per_s", std::to_string(int(kTasks / secs)));
  EXPECT_GT(kTasks / secs, 2000.0) << kTasks << " tasks in " << secs << " s";
}

TEST_F(NoopExecutorTest, StopDropsRunningTasksWithoutReportingThem) {
  ASSERT_TRUE(executor_.Launch(Noop(1, 1000)).ok());
  executor_.Stop(ShutdownMode::kLeaveTasks);
  clock_.AdvanceMs(1000);
  EXPECT_TRUE(executor_.Running().empty());
  EXPECT_EQ(executor_.Launch(Noop(2, 0)).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(rec_.exits().empty());
}

}  // namespace
}  // namespace gpusched::agent
