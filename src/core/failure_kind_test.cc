// Issue 41: every way a task ends without success names its kind in Task::failure, as Slurm's
// TIMEOUT, OUT_OF_MEMORY, NODE_FAIL. The kind of a retried failure is the last attempt's;
// a retry itself leaves the task pending with no failure. Each test drives the path that
// fails the task (an exit report, the clock past a limit, a silent node or task, a cancel).

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;
using testing::WholeGpuTask;

class FailureKindTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerConfig c;
    c.fail_max = 0;  // the first failure is the last
    Init(c);
    AddNode(MakeNode("a", 1, 16 * kGiB));
  }
  // Submits `spec` and starts it on node a.
  TaskId Started(TaskSpec spec) {
    const TaskId id = Submit(spec);
    sched_->Tick();
    StartAssigned();
    EXPECT_EQ(T(id).state, TaskState::kRunning);
    return id;
  }
  void Finish(TaskId id, int code, FinishCause cause = {}) {
    ASSERT_TRUE(sched_->TaskFinished(id, T(id).attempts, code, 0, "", cause).ok());
  }
};

TEST_F(FailureKindTest, Issue41_CN115981827A_Claim3_ANonZeroExitIsExit) {
  const TaskId id = Started(WholeGpuTask(1));
  Finish(id, 3);
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).failure, Failure::kExit);
  EXPECT_EQ(T(id).reason, "exited with code 3 (failed 1 time, 0 retries allowed)");
}

TEST_F(FailureKindTest, Issue41_CN115981827A_Claim3_ARetryIsPendingWithoutAFailure) {
  Init(SchedulerConfig{});  // fail_max 3
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Started(WholeGpuTask(1));
  Finish(id, 3);
  EXPECT_EQ(T(id).state, TaskState::kPending);
  EXPECT_EQ(T(id).failure, Failure::kNone);
  EXPECT_EQ(T(id).reason, "exited with code 3; retry 1 of 3 from the retry queue within 30s");
}

TEST_F(FailureKindTest, Issue41_AnOomKillAndAGpuMemoryFailureAreOutOfMemory) {
  const TaskId host = Started(WholeGpuTask(1));
  FinishCause oom;
  oom.out_of_memory = true;
  Finish(host, 137, oom);
  EXPECT_EQ(T(host).failure, Failure::kOutOfMemory);
  const TaskId gpu = Started(SharedTask(4 * kGiB));
  Finish(gpu, 1, {.gpu_mem_exceeded = true});
  EXPECT_EQ(T(gpu).failure, Failure::kOutOfMemory);
}

TEST_F(FailureKindTest, Issue41_AProgramThatCannotStartIsLaunch) {
  const TaskId id = Started(WholeGpuTask(1));
  Finish(id, 127, {.permanent = true});
  EXPECT_EQ(T(id).failure, Failure::kLaunch);
}

TEST_F(FailureKindTest, Issue41_ATimeLimitIsTimeout) {
  TaskSpec s = WholeGpuTask(1);
  s.time_limit_ms = 5'000;
  const TaskId id = Started(s);
  RunFor(7'000);
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).failure, Failure::kTimeout);
}

TEST_F(FailureKindTest, Issue41_CN109992422A_Claim8_ASilentTaskIsHung) {
  const TaskId id = Started(WholeGpuTask(1));
  silent_task_.insert(id);
  RunFor(sched_->config().task_timeout_ms + 2'000);
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).failure, Failure::kHung);
}

TEST_F(FailureKindTest, Issue41_ALostNodeIsNodeLost) {
  const TaskId id = Started(WholeGpuTask(1));
  AddNode(MakeNode("b", 1, 16 * kGiB));  // one of two silent: not the eviction hold
  silent_node_.insert("a");
  RunFor(sched_->config().node_lost_after_ms + 2'000);
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).failure, Failure::kNodeLost);
}

TEST_F(FailureKindTest, Issue41_CancelIdleAndUnschedulable) {
  const TaskId cancelled = Submit(WholeGpuTask(1));
  ASSERT_TRUE(sched_->Cancel(cancelled, "cancelled by user").ok());
  EXPECT_EQ(T(cancelled).failure, Failure::kCancelled);
  Status again = sched_->Cancel(cancelled, "cancelled by user");
  EXPECT_EQ(again.message(), "task " + cancelled.ToString() + " was already cancelled");

  const TaskId idle = Started(WholeGpuTask(1));
  ASSERT_TRUE(sched_->StopIdle(idle, "idle").ok());
  EXPECT_EQ(T(idle).failure, Failure::kIdle);

  SchedulerConfig c;
  c.max_placement_failures = 2;
  Init(c);
  AddNode(MakeNode("a", 1, 16 * kGiB));
  TaskSpec huge = WholeGpuTask(1);
  huge.gpu_model = "H100";  // no node has one
  huge.keep_pending_if_infeasible = true;
  const TaskId never = Submit(huge);
  RunFor(100'000);
  EXPECT_EQ(T(never).state, TaskState::kFailed);
  EXPECT_EQ(T(never).failure, Failure::kUnschedulable);
}

TEST(FailureNameTest, Issue41_EveryKindHasANameThatReadsBack) {
  for (int i = 0; i <= static_cast<int>(Failure::kUnschedulable); ++i) {
    const Failure f = static_cast<Failure>(i);
    ASSERT_EQ(FailureFromName(FailureName(f)), f) << i;
  }
  EXPECT_EQ(FailureName(Failure::kOutOfMemory), std::string("out_of_memory"));
  EXPECT_EQ(FailureFromName("nonsense"), std::nullopt);
}

}  // namespace
}  // namespace gpusched::core
