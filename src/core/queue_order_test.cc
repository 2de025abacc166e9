// Queue orders for the simulator's baselines and preemption (suspend / resume) in the core.

#include "core/queue_order.h"

#include <gtest/gtest.h>

#include "core/preemption.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::MakeNode;
using testing::SchedulerTest;
using testing::WholeGpuTask;

constexpr DurationMs kS = 1000;

TaskSpec Job(int gpus, DurationMs duration_s) {
  TaskSpec t = WholeGpuTask(gpus);
  t.duration_ms = duration_s * kS;
  return t;
}

TEST(QueueOrderTest, DefaultKeyIsPtThenFirstSubmission) {
  Task t;
  t.id = TaskId(7);
  t.pt = 3;
  t.seq = 9;
  t.spec.duration_ms = 50 * kS;
  const QueueKey key = MakeQueueKey(QueueOrderOptions{}, t, 0);
  EXPECT_EQ(key, (QueueKey{3, 9, TaskId(7), 0}));
}

TEST(QueueOrderTest, RanksOfTheBaselines) {
  Task t;
  t.id = TaskId(1);
  t.pt = 2;
  t.seq = 4;
  t.spec.gpus = 2;
  t.spec.duration_ms = 100 * kS;
  QueueOrderOptions o;
  o.order = QueueOrder::kSubmission;
  EXPECT_EQ(MakeQueueKey(o, t, 30 * kS), (QueueKey{0, 4, TaskId(1), 0}));
  o.order = QueueOrder::kShortestDuration;
  EXPECT_EQ(MakeQueueKey(o, t, 30 * kS).rank, 100 * kS);
  o.order = QueueOrder::kShortestRemaining;
  EXPECT_EQ(MakeQueueKey(o, t, 30 * kS).rank, 70 * kS);
  // LAS on GPU-time: thresholds 1 h and 10 h of GPU-time; 2 GPUs for 30 min = 1 GPU-hour.
  o.order = QueueOrder::kLeastAttained;
  EXPECT_EQ(MakeQueueKey(o, t, 1799 * kS).rank, 0);
  EXPECT_EQ(MakeQueueKey(o, t, 1800 * kS).rank, 1);
  EXPECT_EQ(MakeQueueKey(o, t, 5 * 3600 * kS).rank, 2);
}

TEST(QueueOrderTest, ThresholdsMustAscend) {
  QueueOrderOptions o;
  o.las_thresholds_gpu_ms = {10, 5};
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.Validate().message().find("las_thresholds[1]"), std::string::npos);
}

class QueueOrderSchedulerTest : public SchedulerTest {
 protected:
  void InitWith(QueueOrder order, bool head_of_line) {
    SchedulerConfig c;
    c.queue_order.order = order;
    c.capacity_wait = CapacityWait::kStayQueued;
    c.head_of_line_blocking = head_of_line;
    Init(c);
    AddNode(MakeNode("n1", 4, 16 * testing::kGiB));
  }
};

// One 4-GPU node busy with a 4-GPU job; queued: A (2 GPUs, 300 s), B (1 GPU, 100 s),
// C (4 GPUs, 50 s). When the node frees: SJF starts C alone; FIFO starts A and B.
TEST_F(QueueOrderSchedulerTest, ShortestDurationServesTheShortestJobFirst) {
  InitWith(QueueOrder::kShortestDuration, false);
  const TaskId blocker = Submit(Job(4, 1000));
  sched_->Schedule();
  StartAssigned();
  const TaskId a = Submit(Job(2, 300)), b = Submit(Job(1, 100)), c = Submit(Job(4, 50));
  ASSERT_TRUE(sched_->TaskFinished(blocker, 1, 0, 0).ok());
  sched_->Schedule();
  EXPECT_EQ(T(c).state, TaskState::kAssigned);
  EXPECT_EQ(T(a).state, TaskState::kPending);
  EXPECT_EQ(T(b).state, TaskState::kPending);
  ExpectInvariants();
}

TEST_F(QueueOrderSchedulerTest, SubmissionOrderServesFirstComeFirst) {
  InitWith(QueueOrder::kSubmission, false);
  const TaskId blocker = Submit(Job(4, 1000));
  sched_->Schedule();
  StartAssigned();
  const TaskId a = Submit(Job(2, 300)), b = Submit(Job(1, 100)), c = Submit(Job(4, 50));
  ASSERT_TRUE(sched_->TaskFinished(blocker, 1, 0, 0).ok());
  sched_->Schedule();
  EXPECT_EQ(T(a).state, TaskState::kAssigned);
  EXPECT_EQ(T(b).state, TaskState::kAssigned);
  EXPECT_EQ(T(c).state, TaskState::kPending);
}

// Strict FIFO: a 4-GPU head that does not fit blocks a 1-GPU job behind it.
TEST_F(QueueOrderSchedulerTest, HeadOfLineBlockingStopsAtTheFirstMisfit) {
  InitWith(QueueOrder::kSubmission, true);
  Submit(Job(2, 1000));
  sched_->Schedule();
  const TaskId big = Submit(Job(4, 10)), small = Submit(Job(1, 10));
  sched_->Schedule();
  EXPECT_EQ(T(big).state, TaskState::kPending);
  EXPECT_EQ(T(small).state, TaskState::kPending);
}

TEST_F(QueueOrderSchedulerTest, PreemptReleasesResourcesAndKeepsAttainedService) {
  InitWith(QueueOrder::kShortestRemaining, false);
  const TaskId long_job = Submit(Job(4, 100));
  sched_->Schedule();
  StartAssigned();
  clock_.AdvanceMs(30 * kS);
  ASSERT_TRUE(sched_->Preempt(long_job).ok());
  const Task& t = T(long_job);
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(t.attained_ms, 30 * kS);
  EXPECT_EQ(t.preemptions, 1);
  EXPECT_EQ(t.fail_cnt, 0);
  EXPECT_EQ(sched_->cluster().node(0).gpu_allocated_mib, 0);
  EXPECT_EQ(sched_->stats().preemptions, 1);
  const std::vector<Action> actions = sched_->TakeActions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Action::Kind::kKill);
  ExpectInvariants();
  // Remaining 70 s ranks before a new 80 s job: resumed first, as attempt 2.
  const TaskId newcomer = Submit(Job(4, 80));
  sched_->Schedule();
  EXPECT_EQ(T(long_job).state, TaskState::kAssigned);
  EXPECT_EQ(T(long_job).attempts, 2);
  EXPECT_EQ(T(newcomer).state, TaskState::kPending);
  clock_.AdvanceMs(70 * kS);
  ASSERT_TRUE(sched_->TaskFinished(long_job, 2, 0, 0).ok());
  EXPECT_EQ(T(long_job).attained_ms, 100 * kS);
  ExpectInvariants();
}

TEST_F(QueueOrderSchedulerTest, PreemptingAPendingTaskIsFailedPrecondition) {
  InitWith(QueueOrder::kShortestRemaining, false);
  TaskSpec wide = Job(8, 10);  // wider than the node: stays pending
  wide.keep_pending_if_infeasible = true;
  const TaskId id = Submit(wide);
  EXPECT_EQ(sched_->Preempt(id).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sched_->Preempt(TaskId(99)).code(), StatusCode::kNotFound);
}

// 4 GPUs. Running: A (2 GPUs, 90 s left), B (2 GPUs, 10 s left). Arriving: C (2 GPUs, 20 s).
// SRTF order B(10), C(20), A(90): B and C fill the 4 GPUs, so A is the victim.
TEST(PreemptionTest, SrtfGreedyInOrderPicksTheLongestRemainingAsVictim) {
  auto make = [](uint64_t id, int gpus, DurationMs duration, TaskState state, TimeMs assigned) {
    Task t;
    t.id = TaskId(id);
    t.seq = id;
    t.spec.gpus = gpus;
    t.spec.duration_ms = duration;
    t.state = state;
    t.assigned_ms = assigned;
    return t;
  };
  const Task a = make(1, 2, 100 * kS, TaskState::kRunning, 0);
  const Task b = make(2, 2, 20 * kS, TaskState::kRunning, 0);
  const Task c = make(3, 2, 20 * kS, TaskState::kPending, 0);
  QueueOrderOptions o;
  o.order = QueueOrder::kShortestRemaining;
  EXPECT_EQ(SelectPreemptionVictims(o, {&a, &b, &c}, 4, 10 * kS), std::vector<TaskId>{TaskId(1)});
  // A 6-GPU task ahead in order is skipped when it does not fit; nobody is preempted for it.
  const Task wide = make(4, 6, 1 * kS, TaskState::kPending, 0);
  EXPECT_EQ(SelectPreemptionVictims(o, {&a, &b, &wide}, 4, 10 * kS), std::vector<TaskId>{});
}

}  // namespace
}  // namespace gpusched::core
