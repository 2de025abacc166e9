// What a newcomer sees of the scheduler's decisions (issue 18): time limits, launch failures
// that no retry can fix, drain without eviction, and `why` in terms of need against supply.

#include <gtest/gtest.h>

#include "core/explain_need.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;
using testing::WholeGpuTask;

class FirstHourTest : public testing::StayQueuedSchedulerTest {};

TEST_F(FirstHourTest, PastItsTimeLimitATaskIsKilledAndFailedWithoutRetry) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  TaskSpec spec = SharedTask(4 * kGiB);
  spec.time_limit_ms = 5000;
  const TaskId id = Submit(spec);
  sched_->Tick();
  StartAssigned();
  AdvanceAlive(4000);
  sched_->Tick();
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  AdvanceAlive(2000);
  sched_->Tick();
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_NE(T(id).reason.find("time limit 5s"), std::string::npos) << T(id).reason;
  bool killed = false;
  for (const Action& a : sched_->TakeActions()) {
    killed |= a.kind == Action::Kind::kKill && a.task == id && a.reason == "time limit";
  }
  EXPECT_TRUE(killed);
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].allocated_mib, 0);
  ExpectInvariants();
}

TEST_F(FirstHourTest, APermanentLaunchFailureFailsAtOnce) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(4 * kGiB));
  sched_->Tick();
  sched_->TakeActions();
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 127, 0, "launch failed: command: nope: not found",
                                  {.permanent = true})
                  .ok());
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).reason, "launch failed: command: nope: not found");
  ExpectInvariants();
}

TEST_F(FirstHourTest, DrainLetsRunningTasksFinishUnlessEvicting) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(4 * kGiB));
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(sched_->Drain("a", false).ok());
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_TRUE(sched_->cluster().node(0).draining);
  EXPECT_TRUE(sched_->TakeActions().empty());  // nothing killed
  ASSERT_TRUE(sched_->Drain("a", true).ok());
  EXPECT_EQ(T(id).state, TaskState::kPending);
  ExpectInvariants();
}

TEST_F(FirstHourTest, WhyNamesTheNeedAgainstTheMostFree) {
  AddNode(MakeNode("a", 2, 16 * kGiB));
  const TaskId small = Submit(SharedTask(12 * kGiB));
  const TaskId other = Submit(SharedTask(10 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TaskId big = Submit(SharedTask(8 * kGiB));
  const TaskId whole = Submit(WholeGpuTask(1));
  sched_->Tick();
  (void)small;
  (void)other;
  auto need = sched_->Explain(big);
  ASSERT_TRUE(need.ok());
  EXPECT_EQ(need->need.rfind("needs 8GiB on one GPU; most free is 6GiB on a GPU ", 0), 0u)
      << need->need;
  auto busy = sched_->Explain(whole);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(busy->need, "needs 1 free GPU on one node; a has 0");
  EXPECT_NE(busy->summary.find("too few free GPUs"), std::string::npos) << busy->summary;
  EXPECT_EQ(busy->summary.find("insufficient GPU memory"), std::string::npos) << busy->summary;
}

}  // namespace
}  // namespace gpusched::core
