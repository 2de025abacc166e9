// Scheduler::Restore: tasks read back from a store after a restart keep their ids, state and
// placement, and the scheduler goes on deciding as if it had never stopped.

#include <gtest/gtest.h>

#include <memory>

#include "base/clock.h"
#include "core/scheduler.h"

namespace gpusched::core {
namespace {

NodeSpec Node(const std::string& name, int gpus, MiB mib) {
  NodeSpec n;
  n.name = name;
  n.address = name + ":7071";
  n.capacity = {64'000, 512 * 1024};
  n.gpus.assign(static_cast<size_t>(gpus), GpuSpec{"A100", mib});
  return n;
}

TaskSpec Shared(MiB mib) {
  TaskSpec t;
  t.gpus = 1;
  t.gpu_mem_mib = mib;
  return t;
}

std::unique_ptr<Scheduler> Make(Clock& clock) {
  SchedulerConfig c;
  c.capacity_wait = CapacityWait::kStayQueued;
  auto s = Scheduler::Create(c, clock);
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

// Runs tasks 1-2 on a 16 GiB GPU (6 GiB each), leaves 3 pending, finishes 4, then restores
// everything into a fresh scheduler.
TEST(SchedulerRestoreTest, KeepsIdsStatesAndReservations) {
  FakeClock clock(1'000);
  auto a = Make(clock);
  ASSERT_TRUE(a->RegisterNode(Node("n1", 1, 16 * 1024)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->Submit(Shared(6 * 1024)).ok());
  a->Schedule();
  ASSERT_TRUE(a->TaskStarted(TaskId(1), 1).ok());
  ASSERT_EQ(a->GetTask(TaskId(3))->state, TaskState::kPending);

  clock.AdvanceMs(60'000);  // longer than T_task: a stale heartbeat must not reclaim
  auto b = Make(clock);
  ASSERT_TRUE(b->RegisterNode(Node("n1", 1, 16 * 1024)).ok());
  for (const Task* t : a->Tasks()) ASSERT_TRUE(b->Restore(*t).ok());
  ASSERT_TRUE(b->CheckInvariants().ok()) << b->CheckInvariants().ToString();

  EXPECT_EQ(b->GetTask(TaskId(1))->state, TaskState::kRunning);
  EXPECT_EQ(b->GetTask(TaskId(2))->state, TaskState::kAssigned);
  EXPECT_EQ(b->cluster().node(0).gpus[0].allocated_mib, 12 * 1024);
  b->Tick();
  EXPECT_EQ(b->GetTask(TaskId(1))->state, TaskState::kRunning);  // not reclaimed
  EXPECT_EQ(b->GetTask(TaskId(3))->state, TaskState::kPending);  // still no room

  // The agent reports the restored attempt finished: the waiting task is placed.
  ASSERT_TRUE(b->TaskFinished(TaskId(1), 1, 0, 0).ok());
  b->Schedule();
  EXPECT_EQ(b->GetTask(TaskId(1))->state, TaskState::kSucceeded);
  EXPECT_EQ(b->GetTask(TaskId(3))->state, TaskState::kAssigned);
  // New submissions continue the id sequence.
  auto id = b->Submit(Shared(1024));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->value(), 4u);
  EXPECT_GT(b->GetTask(*id)->seq, b->GetTask(TaskId(3))->seq);
  EXPECT_TRUE(b->CheckInvariants().ok());
}

TEST(SchedulerRestoreTest, UnknownNodeRequeuesWithoutCountingAFailure) {
  FakeClock clock(1'000);
  auto a = Make(clock);
  ASSERT_TRUE(a->RegisterNode(Node("gone", 2, 16 * 1024)).ok());
  ASSERT_TRUE(a->Submit(Shared(1024)).ok());
  a->Schedule();
  auto b = Make(clock);
  ASSERT_TRUE(b->RegisterNode(Node("other", 1, 16 * 1024)).ok());
  ASSERT_TRUE(b->Restore(*a->GetTask(TaskId(1))).ok());
  const Task& t = *b->GetTask(TaskId(1));
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(t.fail_cnt, 0);
  EXPECT_FALSE(t.placement.has_value());
  b->Schedule();
  EXPECT_EQ(b->GetTask(TaskId(1))->placement->node, "other");
  EXPECT_TRUE(b->CheckInvariants().ok());
}

// Forgotten (finished) and withdrawn tasks leave gaps in the ids a store gives back; a
// decreasing or repeated id is still a bug in the caller.
TEST(SchedulerRestoreTest, AcceptsGapsButRejectsOutOfOrderIds) {
  FakeClock clock(0);
  auto b = Make(clock);
  Task t;
  t.id = TaskId(2);
  ASSERT_TRUE(b->Restore(t).ok());
  t.id = TaskId(7);
  ASSERT_TRUE(b->Restore(t).ok());
  t.id = TaskId(5);
  Status s = b->Restore(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected an id >= 8"), std::string::npos) << s.message();
  EXPECT_EQ(b->Tasks().size(), 2u);
  b->ReserveIdsBelow(20);  // the store held finished tasks up to 19
  auto id = b->Submit(Shared(1024));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->value(), 20u);
}

// The server holds a submission out of Q until its record is stored: a pass never places a
// held task, Withdraw leaves no trace, Release queues it.
TEST(SchedulerMemoryTest, HeldSubmissionIsNotScheduledUntilReleased) {
  FakeClock clock(0);
  auto b = Make(clock);
  ASSERT_TRUE(b->RegisterNode(Node("n1", 1, 16384)).ok());
  auto held = b->Submit(Shared(1024), /*hold=*/true);
  auto gone = b->Submit(Shared(1024), /*hold=*/true);
  ASSERT_TRUE(held.ok() && gone.ok());
  EXPECT_EQ(b->Schedule(), 0u);
  EXPECT_EQ(b->Cancel(*held).code(), StatusCode::kNotFound);  // not acknowledged yet
  ASSERT_TRUE(b->Withdraw(*gone).ok());
  EXPECT_EQ(b->GetTask(*gone), nullptr);
  ASSERT_TRUE(b->Release(*held).ok());
  EXPECT_EQ(b->Release(*held).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(b->Schedule(), 1u);
  EXPECT_EQ(b->GetTask(*held)->state, TaskState::kAssigned);
  ASSERT_TRUE(b->CheckInvariants().ok());
  auto next = b->Submit(Shared(1024));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->value(), 3u);  // the withdrawn id is not reused
}

TEST(SchedulerMemoryTest, OnlyTerminalTasksCanBeForgotten) {
  FakeClock clock(0);
  auto b = Make(clock);
  ASSERT_TRUE(b->RegisterNode(Node("n1", 1, 16384)).ok());
  auto id = b->Submit(Shared(1024));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(b->Forget(*id).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b->Cancel(*id).ok());
  ASSERT_TRUE(b->Forget(*id).ok());
  EXPECT_EQ(b->GetTask(*id), nullptr);
  EXPECT_EQ(b->task_count(), 0u);
  ASSERT_TRUE(b->CheckInvariants().ok());
}

// A task retried thousands of times keeps a bounded history: its first transition and the
// latest ones.
TEST(SchedulerMemoryTest, HistoryIsCapped) {
  FakeClock clock(0);
  auto b = Make(clock);
  ASSERT_TRUE(b->RegisterNode(Node("n1", 1, 16384)).ok());
  auto id = b->Submit(Shared(1024));  // drains do not count failures: no retry limit hit
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 500; ++i) {
    b->Schedule();
    const Task* t = b->GetTask(*id);
    ASSERT_EQ(t->state, TaskState::kAssigned);
    ASSERT_TRUE(b->Drain("n1", true).ok());
    ASSERT_TRUE(b->Cordon("n1", false).ok());
  }
  const Task* t = b->GetTask(*id);
  EXPECT_EQ(t->history.size(), kMaxHistory);
  EXPECT_EQ(t->history.front().reason, "submitted");
  EXPECT_EQ(t->attempts, 500);
}

}  // namespace
}  // namespace gpusched::core
