// Issue 37: production queue orders. Order preemption (Scheduler::PreemptForOrder) on the
// fake clock: victims requeued, not failed; a quantum before the order stops a run; priority
// classes before the order; the exit of a preempted attempt as a checkpoint; stop signals.

#include <gtest/gtest.h>

#include "core/preemption.h"
#include "core/queue_order.h"
#include "core/stop_signal.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kS;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::WholeGpuTask;


class OrderPreemptionTest : public SchedulerTest {
 protected:
  // One node with one GPU; LAS with one threshold at 2 GPU-seconds; a pass every second.
  void InitLas(DurationMs quantum_ms, QueueOrder order = QueueOrder::kLeastAttained) {
    SchedulerConfig c;
    c.queue_order.order = order;
    c.queue_order.las_thresholds_gpu_ms = {2 * kS};
    c.queue_order.dlas_thresholds_gpu_ms = {2 * kS};
    c.queue_order.quantum_ms = quantum_ms;
    c.capacity_wait = CapacityWait::kStayQueued;
    c.t1_ms = kS;
    c.preemption_grace_ms = 7 * kS;
    Init(c);
    AddNode(MakeNode("n1", 1, 16 * testing::kGiB));
  }
  // Runs the loop (Tick every second) and reports the start of every assignment.
  void Run(DurationMs ms) {
    for (DurationMs done = 0; done < ms; done += kS) {
      RunFor(kS);
      StartAssigned();
    }
  }
};

// A runs 6 s (queue 1); B arrives (queue 0): the order stops A after its quantum. A is
// requeued in state preempted, with no failure counted, a kill carrying its grace, and the
// order's reason; B starts.
TEST_F(OrderPreemptionTest, Issue37_OrderPreemptedTaskIsRequeuedNotFailed) {
  InitLas(5 * kS);
  const TaskId a = Submit(WholeGpuTask(1, "a"));
  Run(6 * kS);
  ASSERT_EQ(T(a).state, TaskState::kRunning);
  const TaskId b = Submit(WholeGpuTask(1, "b"));
  RunFor(kS);
  EXPECT_EQ(T(a).state, TaskState::kPreempted);
  EXPECT_EQ(T(a).fail_cnt, 0);
  EXPECT_EQ(T(a).preemptions, 1);
  ASSERT_FALSE(T(a).history.empty());
  EXPECT_EQ(T(a).history.back().state, TaskState::kPreempted);
  EXPECT_EQ(T(a).history.back().reason, "preempted by the queue order (least-attained)");
  EXPECT_EQ(T(b).state, TaskState::kAssigned);
  EXPECT_EQ(sched_->stats().order_preemptions, 1);
  bool killed = false;
  for (const Action& act : sched_->TakeActions()) {
    if (act.kind == Action::Kind::kKill && act.task == a) {
      killed = true;
      EXPECT_EQ(act.grace_ms, 7 * kS);
    }
  }
  EXPECT_TRUE(killed);
  ExpectInvariants();
}

// After A was stopped for B, B crosses the threshold 2 s later and ranks behind A (FIFO
// inside queue 1): without a quantum the order stops B at once (the two undo each other);
// with a 5 s quantum B keeps its GPU for 5 s of run.
TEST_F(OrderPreemptionTest, Issue37_NoPreemptionBackWithinOneQuantum) {
  for (const DurationMs quantum : {DurationMs{0}, 5 * kS}) {
    SCOPED_TRACE("quantum " + std::to_string(quantum));
    InitLas(quantum);
    const TaskId a = Submit(WholeGpuTask(1, "a"));
    Run(6 * kS);
    const TaskId b = Submit(WholeGpuTask(1, "b"));
    Run(kS);
    ASSERT_EQ(T(b).state, TaskState::kRunning);
    ASSERT_EQ(T(a).state, TaskState::kPreempted);
    Run(3 * kS);  // B has run 3 s: 3 GPU-s, queue 1, behind A
    if (quantum == 0) {
      EXPECT_EQ(T(b).preemptions, 1);
      EXPECT_NE(T(a).state, TaskState::kPreempted);
      continue;
    }
    EXPECT_EQ(T(b).state, TaskState::kRunning);
    EXPECT_EQ(T(b).preemptions, 0);
    Run(2 * kS);  // B's run reached the quantum: now the order may stop it
    EXPECT_EQ(T(b).preemptions, 1);
    EXPECT_EQ(T(a).state, TaskState::kRunning);
    EXPECT_EQ(T(a).fail_cnt + T(b).fail_cnt, 0);
    ExpectInvariants();
  }
}

// Priority classes first, the order inside a class: a high task past the threshold is not
// stopped for a low newcomer in queue 0 (priority preemption would take the GPU straight
// back), while a normal one is.
TEST_F(OrderPreemptionTest, Issue37_OrderAndPriorityPreemptionCompose) {
  InitLas(0);
  TaskSpec high = WholeGpuTask(1, "high");
  high.priority_class = "high";
  const TaskId h = Submit(high);
  Run(4 * kS);
  TaskSpec low = WholeGpuTask(1, "low");
  low.priority_class = "low";
  const TaskId l = Submit(low);
  Run(5 * kS);
  EXPECT_EQ(T(h).state, TaskState::kRunning);
  EXPECT_EQ(T(h).preemptions, 0);
  EXPECT_TRUE(IsPending(T(l).state));
  EXPECT_EQ(sched_->stats().preemptions, 0);
  ExpectInvariants();
}

// Under dlas with a quantum: a priority preemption's victim that the order would serve first
// does not take its GPU back by the order before the preemptor ran one quantum.
TEST_F(OrderPreemptionTest, Issue37_PriorityPreemptorKeepsItsQuantum) {
  InitLas(5 * kS, QueueOrder::kTwoDimLas);
  const TaskId n = Submit(WholeGpuTask(1, "normal"));
  Run(3 * kS);
  TaskSpec high = WholeGpuTask(1, "high");
  high.priority_class = "high";
  const TaskId h = Submit(high);
  Run(2 * kS);
  ASSERT_EQ(T(h).state, TaskState::kRunning);
  ASSERT_EQ(T(n).preemptions, 1);
  Run(8 * kS);
  EXPECT_EQ(T(h).state, TaskState::kRunning);  // a higher class: never stopped by the order
  EXPECT_EQ(T(h).preemptions, 0);
  EXPECT_EQ(sched_->stats().order_preemptions, 0);
}

// A preempted attempt that exits 0 (within its grace: the agent kills it after) is a
// checkpoint; one killed is not. Neither changes the requeued task's state.
TEST_F(OrderPreemptionTest, Issue37_PreemptedAttemptExitingZeroIsACheckpoint) {
  InitLas(0);
  const TaskId a = Submit(WholeGpuTask(1, "a"));
  Run(4 * kS);
  const TaskId b = Submit(WholeGpuTask(1, "b"));
  Run(kS);
  ASSERT_EQ(T(a).state, TaskState::kPreempted);
  ASSERT_EQ(T(a).attempts, 1);
  ASSERT_TRUE(sched_->TaskFinished(a, 1, 0, 0).ok());
  EXPECT_EQ(T(a).checkpoints, 1);
  EXPECT_EQ(T(a).checkpointed_attempt, 1);
  EXPECT_EQ(T(a).state, TaskState::kPreempted);
  EXPECT_EQ(sched_->stats().checkpoints, 1);
  // A repeated report changes nothing.
  EXPECT_FALSE(sched_->TaskFinished(a, 1, 0, 0).ok());
  EXPECT_EQ(T(a).checkpoints, 1);
  // B, stopped in its turn and killed after its grace: no checkpoint.
  Run(4 * kS);
  ASSERT_EQ(T(b).preemptions, 1);
  const int64_t attempt = T(b).attempts;
  ASSERT_TRUE(sched_->TaskFinished(b, attempt, 137, 0, "killed by signal 9").ok());
  EXPECT_EQ(T(b).checkpoints, 0);
  EXPECT_EQ(T(b).fail_cnt, 0);
  ExpectInvariants();
}

TEST(StopSignalTest, Issue37_NamesNumbersAndRefusals) {
  EXPECT_EQ(*ParseStopSignal("TERM", "--signal"), 15);
  EXPECT_EQ(*ParseStopSignal("SIGUSR1", "--signal"), 10);
  EXPECT_EQ(*ParseStopSignal("usr2", "--signal"), 12);
  EXPECT_EQ(*ParseStopSignal("2", "--signal"), 2);
  EXPECT_EQ(*ParseStopSignal("40", "--signal"), 40);
  for (const char* bad : {"9", "KILL", "STOP", "19", "CHLD", "0", "65", "", "TERMX", "-1",
                          "1000", "SIG"}) {
    StatusOr<int> s = ParseStopSignal(bad, "--signal");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--signal"), std::string::npos) << bad;
  }
  EXPECT_NE(ParseStopSignal("KILL", "--signal").status().message().find("cannot be caught"),
            std::string::npos);
  EXPECT_EQ(StopSignalName(10), "SIGUSR1");
  EXPECT_EQ(StopSignalName(36), "SIGRTMIN+2");
}

// The spec's stop signal is checked at admission, naming the field.
TEST_F(OrderPreemptionTest, Issue37_AdmissionChecksTheStopSignal) {
  InitLas(0);
  TaskSpec t = WholeGpuTask(1);
  t.stop_signal = 19;
  StatusOr<TaskId> id = sched_->Submit(t);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("signal: 19"), std::string::npos)
      << id.status().message();
}

TEST(QueueOrderOptionsTest, Issue37_QuantumRangeAndPreemptiveOrders) {
  QueueOrderOptions o;
  EXPECT_EQ(o.quantum_ms, 60'000);
  o.quantum_ms = -1;
  EXPECT_NE(o.Validate().message().find("queue_order.quantum"), std::string::npos);
  EXPECT_TRUE(IsPreemptiveOrder(QueueOrder::kLeastAttained));
  EXPECT_TRUE(IsPreemptiveOrder(QueueOrder::kTwoDimLas));
  EXPECT_TRUE(IsPreemptiveOrder(QueueOrder::kShortestRemaining));
  EXPECT_FALSE(IsPreemptiveOrder(QueueOrder::kPriority));
  EXPECT_FALSE(IsPreemptiveOrder(QueueOrder::kShortestDuration));
}

}  // namespace
}  // namespace gpusched::core
