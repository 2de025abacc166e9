// Queue orders for the simulator's baselines and preemption (suspend / resume) in the core.

#include "core/queue_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "core/preemption.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kS;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::WholeGpuTask;


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

// 2D-LAS, default thresholds 3,250 and 7,200 GPU-seconds: 2 GPUs for 1,624 s = 3,248 GPU-s is
// still queue 0, 1,625 s crosses into queue 1. Rank = 2 x queue + (0 if holding GPUs, else 1).
TEST(QueueOrderTest, TwoDimLasRanksByQueueThenRunningAheadOfPending) {
  Task t;
  t.id = TaskId(1);
  t.spec.gpus = 2;
  QueueOrderOptions o;
  o.order = QueueOrder::kTwoDimLas;
  EXPECT_EQ(MakeQueueKey(o, t, 1624 * kS).rank, 1);
  EXPECT_EQ(MakeQueueKey(o, t, 1625 * kS).rank, 3);
  EXPECT_EQ(MakeQueueKey(o, t, 3600 * kS).rank, 5);
  t.state = TaskState::kRunning;
  EXPECT_EQ(MakeQueueKey(o, t, 1625 * kS).rank, 2);
  EXPECT_EQ(MakeQueueKey(o, t, 0).rank, 0);
  // After a starvation promotion only the service since then counts.
  t.state = TaskState::kPending;
  t.las_base_ms = 1625 * kS;
  EXPECT_EQ(MakeQueueKey(o, t, 3000 * kS).rank, 1);
  // Plain LAS ignores running state: 2 GPU-hours is queue 1 either way.
  o.order = QueueOrder::kLeastAttained;
  t.las_base_ms = 0;
  EXPECT_EQ(MakeQueueKey(o, t, 3600 * kS).rank, 1);
  t.state = TaskState::kRunning;
  EXPECT_EQ(MakeQueueKey(o, t, 3600 * kS).rank, 1);
}

TEST(QueueOrderTest, PromotionFallsDueAfterKnobTimesTheExecutedTime) {
  Task t;
  t.state = TaskState::kPending;
  t.attained_ms = 100 * kS;
  t.las_base_ms = 40 * kS;
  t.released_ms = 500 * kS;
  QueueOrderOptions o;
  o.order = QueueOrder::kTwoDimLas;
  EXPECT_EQ(PromotionDueMs(o, t), std::nullopt);  // knob 0: off
  o.dlas_promote_knob = 2;
  EXPECT_EQ(PromotionDueMs(o, t), std::optional<TimeMs>(620 * kS));  // 500 + 2 x 60
  o.dlas_promote_knob = 0.5;
  EXPECT_EQ(PromotionDueMs(o, t), std::optional<TimeMs>(530 * kS));
  t.state = TaskState::kRunning;
  EXPECT_EQ(PromotionDueMs(o, t), std::nullopt);
  t.state = TaskState::kPending;
  t.las_base_ms = t.attained_ms;  // nothing executed since the last promotion
  EXPECT_EQ(PromotionDueMs(o, t), std::nullopt);
  o.order = QueueOrder::kLeastAttained;
  t.las_base_ms = 0;
  EXPECT_EQ(PromotionDueMs(o, t), std::nullopt);
}

TEST(QueueOrderTest, PromoteKnobMustBeFiniteAndNonNegative) {
  QueueOrderOptions o;
  for (double bad : {-1.0, std::nan(""), 2e6}) {
    o.dlas_promote_knob = bad;
    EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.Validate().message().find("dlas_promote_knob"), std::string::npos);
  }
  o.dlas_promote_knob = 0;
  o.dlas_thresholds_gpu_ms = {0};
  EXPECT_NE(o.Validate().message().find("dlas_thresholds[0]"), std::string::npos);
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

// 2D-LAS starvation rule on 4 GPUs, threshold 100 GPU-s, knob 1: S (4 GPUs) runs 50 s (200
// GPU-s, queue 1) and is suspended at 50 s; N (4 GPUs, new, queue 0) waits behind nothing.
// Before 100 s S ranks after N; at 100 s (50 s waited = 1 x 50 s executed) S returns to
// queue 0 and, submitted first, ranks before N. Its total attained service is kept.
TEST_F(QueueOrderSchedulerTest, TwoDimLasPromotesAStarvedTaskToQueueZero) {
  SchedulerConfig c;
  c.queue_order.order = QueueOrder::kTwoDimLas;
  c.queue_order.dlas_thresholds_gpu_ms = {100 * kS};
  c.queue_order.dlas_promote_knob = 1;
  c.capacity_wait = CapacityWait::kStayQueued;
  c.node_timeout_ms = c.task_timeout_ms = c.node_lost_after_ms = int64_t{1} << 40;  // no heartbeats here
  Init(c);
  AddNode(MakeNode("n1", 4, 16 * testing::kGiB));
  const TaskId starved = Submit(Job(4, 1000));
  sched_->Schedule();
  StartAssigned();
  clock_.AdvanceMs(50 * kS);
  ASSERT_TRUE(sched_->Preempt(starved).ok());
  EXPECT_EQ(T(starved).released_ms, 50 * kS);
  const TaskId fresh = Submit(Job(4, 10));
  EXPECT_EQ(sched_->MainQueueOrder(), (std::vector<TaskId>{fresh, starved}));
  clock_.AdvanceMs(50 * kS - 1);
  EXPECT_EQ(sched_->PromoteStarved(), 0u);
  EXPECT_EQ(sched_->MainQueueOrder(), (std::vector<TaskId>{fresh, starved}));
  clock_.AdvanceMs(1);
  sched_->Tick();  // Tick promotes, then the pass starts the promoted task
  EXPECT_EQ(sched_->stats().las_promotions, 1);
  EXPECT_EQ(T(starved).las_base_ms, 50 * kS);
  EXPECT_EQ(T(starved).attained_ms, 50 * kS);
  EXPECT_EQ(T(starved).state, TaskState::kAssigned);
  EXPECT_EQ(T(fresh).state, TaskState::kPending);
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
  // Issue 37: with the default 60 s quantum, runs of 10 s are kept whatever their order.
  EXPECT_EQ(SelectPreemptionVictims(o, {&a, &b, &c}, 4, 10 * kS), std::vector<TaskId>{});
  o.quantum_ms = 0;  // the textbook walk
  EXPECT_EQ(SelectPreemptionVictims(o, {&a, &b, &c}, 4, 10 * kS), std::vector<TaskId>{TaskId(1)});
  // A 6-GPU task ahead in order is skipped when it does not fit; nobody is preempted for it.
  const Task wide = make(4, 6, 1 * kS, TaskState::kPending, 0);
  EXPECT_EQ(SelectPreemptionVictims(o, {&a, &b, &wide}, 4, 10 * kS), std::vector<TaskId>{});
}

}  // namespace
}  // namespace gpusched::core
