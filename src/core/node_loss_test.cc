// Issue 37, patient and correct node loss: a silent node is unreachable until node_lost_after,
// a returning node keeps its tasks, evictions are held when most nodes fall silent together,
// a late success is kept, the server's own pause is forgiven, and a step of the wall clock
// changes no duration.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;

class NodeLossTest : public testing::SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerConfig c;
    c.capacity_wait = CapacityWait::kStayQueued;
    c.node_timeout_ms = 10'000;
    c.node_lost_after_ms = 60'000;
    Init(c);
  }
  // Three nodes, one task running on "a" (the only node when it was placed).
  TaskId RunOnA() {
    AddNode(MakeNode("a", 1, 16 * kGiB));
    const TaskId id = Submit(SharedTask(8 * kGiB));
    sched_->Tick();
    StartAssigned();
    EXPECT_EQ(T(id).placement->node, "a");
    AddNode(MakeNode("b", 1, 16 * kGiB));
    AddNode(MakeNode("c", 1, 16 * kGiB));
    return id;
  }
  const NodeState& Node(const std::string& name) {
    return sched_->cluster().node(*sched_->cluster().Find(name));
  }
};

TEST_F(NodeLossTest, Issue37_SilentNodeIsUnreachableAndKeepsItsTasksUntilNodeLostAfter) {
  const TaskId id = RunOnA();
  silent_node_.insert("a");
  silent_task_.insert(id);  // its node cannot speak for it
  RunFor(30'000);           // past node_timeout and task_timeout
  EXPECT_FALSE(Node("a").available);
  EXPECT_FALSE(Node("a").lost);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(T(id).fail_cnt, 0);
  EXPECT_EQ(sched_->stats().nodes_lost, 0);
  // Nothing new goes there.
  const TaskId other = Submit(SharedTask(4 * kGiB));
  sched_->Tick();
  ASSERT_TRUE(T(other).placement.has_value());
  EXPECT_NE(T(other).placement->node, "a");
  RunFor(31'000);  // past node_lost_after
  EXPECT_TRUE(Node("a").lost);
  EXPECT_EQ(T(id).fail_cnt, 1);
  EXPECT_EQ(sched_->stats().nodes_lost, 1);
  ExpectInvariants();
}

TEST_F(NodeLossTest, Issue37_NodeBackBeforeNodeLostAfterKeepsItsTasksWithoutAFailure) {
  const TaskId id = RunOnA();
  silent_node_.insert("a");
  silent_task_.insert(id);
  RunFor(45'000);
  ASSERT_FALSE(Node("a").available);
  // Back (a heartbeat listing the attempt): adopted, same attempt, nothing counted.
  ASSERT_TRUE(sched_->HandleNodeHeartbeat({"a", {}, {{id, 1}}, {}}).ok());
  EXPECT_TRUE(sched_->TakeActions().empty());
  silent_node_.clear();
  silent_task_.clear();
  RunFor(60'000);
  EXPECT_TRUE(Node("a").available);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(T(id).attempts, 1);
  EXPECT_EQ(T(id).fail_cnt, 0);
  EXPECT_EQ(sched_->stats().tasks_reclaimed, 0);
  ExpectInvariants();
}

// A restarted agent registers again: the task it adopted is not reclaimed for the silence
// of its node, though it was silent longer than task_timeout.
TEST_F(NodeLossTest, Issue37_ReRegistrationAfterSilenceAdoptsTasksPastTaskTimeout) {
  const TaskId id = RunOnA();
  silent_node_.insert("a");
  silent_task_.insert(id);
  RunFor(45'000);
  ASSERT_TRUE(sched_->RegisterNode(MakeNode("a", 1, 16 * kGiB)).ok());
  ASSERT_TRUE(sched_->HandleNodeHeartbeat({"a", {}, {{id, 1}}, {}}).ok());
  sched_->Tick();
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(T(id).fail_cnt, 0);
}

TEST_F(NodeLossTest, Issue37_MostNodesSilentWithinOneNodeTimeoutHoldsEvictions) {
  const TaskId id = RunOnA();
  silent_node_ = {"a", "b"};  // 2 of 3 at once
  silent_task_.insert(id);
  RunFor(120'000);
  EXPECT_FALSE(Node("a").lost);
  EXPECT_EQ(T(id).fail_cnt, 0);
  EXPECT_NE(sched_->eviction_hold().find("2 of 3 nodes fell silent"), std::string::npos)
      << sched_->eviction_hold();
  // One comes back: 1 of 3 silent, the hold ends, and "a" (silent past node_lost_after) is lost.
  silent_node_ = {"a"};
  RunFor(1'000);
  EXPECT_TRUE(sched_->eviction_hold().empty());
  EXPECT_TRUE(Node("a").lost);
  EXPECT_EQ(T(id).fail_cnt, 1);
}

TEST_F(NodeLossTest, Issue37_NodesSilentFarApartAreNotAMassSilence) {
  const TaskId id = RunOnA();
  silent_node_ = {"b"};
  RunFor(30'000);  // b silent for 30 s ...
  silent_node_ = {"a", "b"};
  silent_task_.insert(id);
  RunFor(61'000);  // ... then a: never 2 within one node_timeout
  EXPECT_TRUE(sched_->eviction_hold().empty());
  EXPECT_TRUE(Node("a").lost);
  EXPECT_EQ(T(id).fail_cnt, 1);
}

TEST_F(NodeLossTest, Issue37_LateSuccessIsKeptWhenNoNewerAttemptWasAssigned) {
  const TaskId id = RunOnA();
  silent_node_.insert("a");
  silent_task_.insert(id);
  ASSERT_TRUE(sched_->Cordon("b", true).ok());
  ASSERT_TRUE(sched_->Cordon("c", true).ok());  // nowhere to run it again yet
  RunFor(71'000);
  ASSERT_EQ(T(id).state, TaskState::kPending);
  ASSERT_EQ(T(id).attempts, 1);
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 0, 0).ok());
  EXPECT_EQ(T(id).state, TaskState::kSucceeded);
  EXPECT_EQ(sched_->main_queue_size() + sched_->failure_queue_size(), 0u);
  ExpectInvariants();
}

TEST_F(NodeLossTest, Issue37_LateExitOfAnOlderAttemptIsRefused) {
  const TaskId id = RunOnA();
  silent_node_.insert("a");
  silent_task_.insert(id);
  RunFor(71'000 + sched_->config().t2_ms);  // lost, then placed again on b or c
  StartAssigned();
  ASSERT_EQ(T(id).attempts, 2);
  EXPECT_EQ(sched_->TaskFinished(id, 1, 0, 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  // A failure of the given-up attempt is not taken late either (it was counted already).
  EXPECT_FALSE(sched_->TaskFinished(id, 1, 1, 0).ok());
}

TEST_F(NodeLossTest, Issue37_ForgiveSilenceGivesEveryNodeAFreshNodeTimeout) {
  const TaskId id = RunOnA();
  silent_node_.insert("b");
  RunFor(8'000);              // b silent before the pause ...
  clock_.AdvanceMs(120'000);  // ... then the server heard nothing: it was paused
  sched_->ForgiveSilence(120'000);
  sched_->Tick();
  EXPECT_TRUE(Node("a").available);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(T(id).fail_cnt, 0);
  // b keeps the silence it had before the pause: unreachable 3 s on.
  clock_.AdvanceMs(3'000);
  sched_->Tick();
  EXPECT_FALSE(Node("b").available);
  EXPECT_TRUE(Node("a").available);
}

// Every duration runs on the monotonic clock: steps of the wall clock by an hour either way
// change no liveness, no time limit, no t1/t2 timer.
TEST_F(NodeLossTest, Issue37_WallClockStepsOfAnHourChangeNothing) {
  const TaskId id = RunOnA();
  TaskSpec limited = SharedTask(4 * kGiB);
  limited.time_limit_ms = 120'000;
  const TaskId timed = Submit(limited);
  sched_->Tick();
  StartAssigned();
  const TimeMs assigned = clock_.MonoMs();
  for (DurationMs step : {3'600'000, -3'600'000, -3'600'000}) {
    clock_.StepWallMs(step);
    RunFor(2'000);
  }
  EXPECT_EQ(sched_->stats().nodes_lost, 0);
  EXPECT_EQ(sched_->stats().tasks_reclaimed, 0);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(T(timed).state, TaskState::kRunning);
  // An hour behind, passes still come every t1.
  const int64_t passes = sched_->stats().passes;
  RunFor(sched_->config().t1_ms + 1'000);
  EXPECT_GT(sched_->stats().passes, passes);
  // Records are wall time that does not step: as far apart as the monotonic clock says.
  EXPECT_EQ(sched_->NowMs() - T(timed).assigned_ms, clock_.MonoMs() - assigned);
  RunFor(120'000 - (clock_.MonoMs() - assigned) + 1'000);
  EXPECT_EQ(T(timed).state, TaskState::kFailed);  // its 2 min limit, on the monotonic clock
}

}  // namespace
}  // namespace gpusched::core
