// Issue 39 (`gpusched admin reload`, SIGHUP): Scheduler::ApplyLiveConfig takes the live
// fields of a reloaded config; a config that does not validate changes nothing.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::WholeGpuTask;

class LiveConfigTest : public testing::SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerConfig c;
    c.wide_task_reservation = false;  // the lazy FQ flush applies (parks waiting tasks)
    Init(c);
  }
};

TEST_F(LiveConfigTest, Issue39_AFiniteMaxPlacementFailuresGivesUpParkedTasksAfterAReload) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId blocker = Submit(WholeGpuTask(1));
  RunFor(1000);
  StartAssigned();
  std::vector<TaskId> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(Submit(WholeGpuTask(1)));
  RunFor(12 * sched_->config().t2_ms);  // demoted to the cap, then parked by the lazy flush
  for (TaskId id : waiting) ASSERT_EQ(T(id).state, TaskState::kPending);
  ASSERT_GT(T(waiting[0]).placement_failures, 3);

  SchedulerConfig next = sched_->config();
  next.max_placement_failures = 3;
  next.t1_ms = 1000;
  next.fail_max = 99;  // not a live field: ignored
  ASSERT_TRUE(sched_->ApplyLiveConfig(next).ok());
  EXPECT_EQ(sched_->config().max_placement_failures, 3);
  EXPECT_EQ(sched_->config().t1_ms, 1000);
  EXPECT_NE(sched_->config().fail_max, 99);
  ExpectInvariants();
  RunFor(2 * sched_->config().t2_ms);
  for (TaskId id : waiting) {
    EXPECT_EQ(T(id).state, TaskState::kFailed) << id.ToString();
    EXPECT_NE(T(id).reason.find("gave up after"), std::string::npos) << T(id).reason;
  }
  EXPECT_EQ(T(blocker).state, TaskState::kRunning);
  ExpectInvariants();
}

TEST_F(LiveConfigTest, Issue39_ALiveConfigThatDoesNotValidateChangesNothing) {
  const SchedulerConfig before = sched_->config();
  SchedulerConfig next = before;
  next.t1_ms = 1234;
  next.node_lost_after_ms = next.node_timeout_ms - 1;
  Status s = sched_->ApplyLiveConfig(next);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node_lost_after"), std::string::npos) << s.message();
  EXPECT_EQ(sched_->config().t1_ms, before.t1_ms);
  EXPECT_EQ(sched_->config().node_lost_after_ms, before.node_lost_after_ms);
}

}  // namespace
}  // namespace gpusched::core
