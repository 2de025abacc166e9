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

TEST(SchedulerRestoreTest, RejectsOutOfOrderIds) {
  FakeClock clock(0);
  auto b = Make(clock);
  Task t;
  t.id = TaskId(2);
  Status s = b->Restore(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected 1"), std::string::npos);
  EXPECT_TRUE(b->Tasks().empty());
}

}  // namespace
}  // namespace gpusched::core
