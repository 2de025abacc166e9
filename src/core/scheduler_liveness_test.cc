// Liveness and lifecycle rules around CN109992422A claims 5-8: lost nodes, returning nodes,
// drains, cancels and stale agent reports.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;

class LivenessTest : public testing::StayQueuedSchedulerTest {};

TEST_F(LivenessTest, CN109992422A_Claim6_LostNodeFailsItsTasksIntoFQAndTheyRunElsewhere) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  AddNode(MakeNode("b", 1, 16 * kGiB));
  silent_node_.insert("a");
  // Issue 37: lost only after node_lost_after (the last FQ flush before it is not yet due).
  AdvanceAlive(sched_->config().node_lost_after_ms - 5000);
  sched_->Tick();
  EXPECT_EQ(T(id).fail_cnt, 0);
  AdvanceAlive(6000);
  sched_->Tick();
  EXPECT_FALSE(sched_->cluster().node(0).available);
  EXPECT_EQ(T(id).fail_cnt, 1);
  EXPECT_EQ(T(id).queue, QueueMembership::kFailure);
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].allocated_mib, 0);  // resources released
  AdvanceAlive(sched_->config().t2_ms);
  sched_->Tick();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, "b");
  EXPECT_EQ(T(id).attempts, 2);
  ExpectInvariants();
}

// An exit the server learns of late (it was down; the agent re-reports it on reconnecting)
// is dated when the task ended as its node saw it: run time, finish time, the run in the
// history (what accounting charges) and attained service end there, not on arrival. A time
// before the task's latest transition or after now is held within them.
TEST_F(LivenessTest, ALateExitReportIsDatedWhenTheTaskEnded) {
  clock_.AdvanceMs(100'000);  // times as Unix ms are: positive, 0 meaning "not said"
  AddNode(MakeNode("a", 2, 16 * kGiB));
  const TaskId late = Submit(SharedTask(8 * kGiB));
  const TaskId early = Submit(SharedTask(8 * kGiB));
  const TaskId future = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TimeMs started = clock_.NowMs();
  AdvanceAlive(4'000);  // each ran 4 s, then ended ...
  const TimeMs ended = clock_.NowMs();
  AdvanceAlive(10'000);  // ... and the server heard of it 10 s later
  FinishCause at;
  at.ended_ms = ended;
  ASSERT_TRUE(sched_->TaskFinished(late, 1, 0, 0, "", at).ok());
  EXPECT_EQ(T(late).finished_ms, ended);
  EXPECT_EQ(T(late).history.back().at_ms, ended);
  EXPECT_EQ(T(late).history.back().state, TaskState::kSucceeded);
  EXPECT_EQ(T(late).attained_ms, ended - T(late).assigned_ms);
  // Before its start (a clock behind the server's): no earlier than its latest transition.
  at.ended_ms = started - 60'000;
  ASSERT_TRUE(sched_->TaskFinished(early, 1, 3, 0, "", at).ok());
  EXPECT_EQ(T(early).history.back().at_ms, T(early).history[T(early).history.size() - 2].at_ms);
  EXPECT_GE(T(early).history.back().at_ms, started);
  // Ahead of the server's clock: now.
  at.ended_ms = clock_.NowMs() + 60'000;
  ASSERT_TRUE(sched_->TaskFinished(future, 1, 0, 0, "", at).ok());
  EXPECT_EQ(T(future).finished_ms, clock_.NowMs());
  // Without a time (an older agent): now, as before.
  const TaskId plain = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  AdvanceAlive(2'000);
  ASSERT_TRUE(sched_->TaskFinished(plain, 1, 0, 0).ok());
  EXPECT_EQ(T(plain).finished_ms, clock_.NowMs());
  // Later transitions are stamped now again.
  const TaskId next = Submit(SharedTask(8 * kGiB));
  EXPECT_EQ(T(next).history.back().at_ms, clock_.NowMs());
  ExpectInvariants();
}

TEST_F(LivenessTest, ReturningNodeIsToldToKillWhatWasGivenUp) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("b", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  const std::string first = T(id).placement->node;
  silent_node_.insert(first);
  AdvanceAlive(sched_->config().node_lost_after_ms + 1000);
  sched_->Tick();
  sched_->TakeActions();
  // The node comes back still running attempt 1, which the scheduler gave up.
  ASSERT_TRUE(sched_->HandleNodeHeartbeat({first, {}, {{id, 1}}, {}}).ok());
  auto actions = sched_->TakeActions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Action::Kind::kKill);
  EXPECT_EQ(actions[0].task, id);
  EXPECT_EQ(actions[0].attempt, 1);
  EXPECT_TRUE(sched_->cluster().node(*sched_->cluster().Find(first)).available);
}

TEST_F(LivenessTest, HeartbeatListingTheCurrentAttemptIsKept) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(sched_->HandleNodeHeartbeat({"a", {16 * kGiB - 100}, {{id, 1}}, {}}).ok());
  EXPECT_TRUE(sched_->TakeActions().empty());
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].reported_free_mib, 16 * kGiB - 100);
}

TEST_F(LivenessTest, StaleAttemptReportsChangeNothing) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  Status s = sched_->TaskFinished(id, 7, 0, 0);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(T(id).state, TaskState::kRunning);
  EXPECT_EQ(sched_->TaskHeartbeat(TaskId(42), 1).code(), StatusCode::kNotFound);
}

TEST_F(LivenessTest, DrainSendsTasksBackWithoutCountingFailures) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("b", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  const std::string first = T(id).placement->node;
  ASSERT_TRUE(sched_->Drain(first, true).ok());
  auto actions = sched_->TakeActions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Action::Kind::kKill);
  sched_->Tick();
  EXPECT_NE(T(id).placement->node, first);
  EXPECT_EQ(T(id).fail_cnt, 0);
  const TaskId later = Submit(SharedTask(kGiB));
  sched_->Tick();
  EXPECT_NE(T(later).placement->node, first);  // cordoned
  EXPECT_EQ(T(later).last_report.rejected[kFilterSchedulable], 1);
  ASSERT_TRUE(sched_->Cordon(first, false).ok());
  EXPECT_FALSE(sched_->cluster().node(*sched_->cluster().Find(first)).draining);
  ExpectInvariants();
}

TEST_F(LivenessTest, AnEndWithoutAStartReportStillRecordsTheRun) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  sched_->TakeActions();  // the start report never arrives
  clock_.AdvanceMs(700);
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 0, 0).ok());
  ASSERT_GE(T(id).history.size(), 3u);
  const Transition& ran = T(id).history[T(id).history.size() - 2];
  EXPECT_EQ(ran.state, TaskState::kRunning);
  EXPECT_EQ(ran.at_ms, 700);
  EXPECT_EQ(T(id).state, TaskState::kSucceeded);
}

TEST_F(LivenessTest, CancelReleasesAndKillsAndIsFinal) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId running = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TaskId pending = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  ASSERT_TRUE(sched_->Cancel(running).ok());
  auto actions = sched_->TakeActions();
  ASSERT_FALSE(actions.empty());
  EXPECT_EQ(actions[0].kind, Action::Kind::kKill);
  EXPECT_EQ(T(running).state, TaskState::kCancelled);
  ASSERT_TRUE(sched_->Cancel(pending).ok());
  EXPECT_EQ(T(pending).state, TaskState::kCancelled);
  EXPECT_EQ(sched_->main_queue_size(), 0u);
  EXPECT_EQ(sched_->Cancel(pending).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].allocated_mib, 0);
  ExpectInvariants();
}

TEST_F(LivenessTest, SuccessReleasesAndTeachesTheMemoryTable) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->memory_table().AddRow({{"classify", "resnet50", 32, 224, 224}, 5000}).ok());
  TaskSpec spec;
  spec.gpus = 1;
  spec.profile = MemoryProfile{"classify", "resnet50", 32, 224, 224};
  const TaskId id = Submit(spec);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 5000);
  EXPECT_EQ(T(id).mem_source, "table");
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 0, 6000).ok());
  EXPECT_EQ(T(id).state, TaskState::kSucceeded);
  EXPECT_EQ(T(id).exit_code, 0);
  const TaskId again = Submit(spec);
  EXPECT_EQ(T(again).gpu_mem_need_mib, 6600);
  EXPECT_EQ(T(again).mem_source, "learned");
  // An explicit value always wins over the table.
  spec.gpu_mem_mib = 1234;
  EXPECT_EQ(T(Submit(spec)).gpu_mem_need_mib, 1234);
}

}  // namespace
}  // namespace gpusched::core
