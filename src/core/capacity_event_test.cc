// Issue 37, capacity on the event (PATENTS.md section 6, "Waiting for capacity is not an
// execution failure"): a release of capacity re-evaluates, in the pass it triggers and in queue
// order, the tasks that wait in FQ for capacity, parked ones (lazy flush) included; t2 still
// demotes and re-queues them (CN115981827A claims 3, 8), and execution failures still wait
// for t2. `why` says which pass produced a reason and what a parked task waits for.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::WholeGpuTask;

class CapacityEventTest : public SchedulerTest {
 protected:
  // The lazy flush applies without fair share and without wide-task reservations (README.md,
  // "The failure queue at scale").
  void InitLazy() {
    SchedulerConfig config;
    config.fair_share.fair_share_weight = 0;
    config.wide_task_reservation = false;
    Init(config);
  }
  // One node of 4 GPUs held by `blocker_`, and `n` one-GPU waiters tried by a pass (in FQ).
  void FillAndWait(int n) {
    AddNode(MakeNode("n1", 4, 80 * kGiB));
    blocker_ = Submit(WholeGpuTask(4));
    ASSERT_EQ(sched_->Tick(), 1u);
    StartAssigned();
    for (int i = 0; i < n; ++i) waiters_.push_back(Submit(WholeGpuTask(1)));
    ASSERT_EQ(sched_->Tick(), 0u);
    for (TaskId w : waiters_) ASSERT_EQ(T(w).queue, QueueMembership::kFailure);
  }
  // Flushes until the waiters' Pt is at the demotion cap, so the lazy flush parks them.
  void ParkWaiters() {
    const DurationMs t2 = sched_->config().t2_ms;
    for (int i = 0; i <= sched_->config().max_priority_value; ++i) RunFor(t2);
    for (TaskId w : waiters_) ASSERT_EQ(T(w).pt, sched_->config().max_priority_value);
    const int64_t parked_before = sched_->stats().parked_waits;
    RunFor(t2);  // a flush pass where the group waits unvisited after its head
    ASSERT_GT(sched_->stats().parked_waits, parked_before) << "the waiters are not parked";
  }
  TaskId blocker_;
  std::vector<TaskId> waiters_;
};

TEST_F(CapacityEventTest, CN115981827A_Claim3_Issue37_CancelPlacesAnFqWaiterInTheSamePass) {
  FillAndWait(1);
  const int64_t failures = T(waiters_[0]).placement_failures;
  ASSERT_TRUE(sched_->Cancel(blocker_).ok());
  EXPECT_EQ(sched_->Tick(), 1u) << "the release's pass, at the same instant: not at t2";
  EXPECT_EQ(T(waiters_[0]).state, TaskState::kAssigned);
  EXPECT_EQ(T(waiters_[0]).placement_failures, failures);
  EXPECT_EQ(T(waiters_[0]).fail_cnt, 0);
  EXPECT_EQ(sched_->failure_queue_size(), 0u);
  ExpectInvariants();
}

TEST_F(CapacityEventTest, CN115981827A_Claim3_Issue37_ParkedWaitersArePlacedByTheReleasePass) {
  InitLazy();
  FillAndWait(6);
  ParkWaiters();
  const int64_t failures = T(waiters_[0]).placement_failures;
  ASSERT_TRUE(sched_->TaskFinished(blocker_, 1, 0, 0).ok());  // a task ending
  EXPECT_EQ(sched_->Tick(), 4u) << "four GPUs freed, four parked waiters placed at once";
  for (size_t i = 0; i < waiters_.size(); ++i) {  // in queue order: the first four
    EXPECT_EQ(T(waiters_[i]).state, i < 4 ? TaskState::kAssigned : TaskState::kPending) << i;
  }
  // The two left wait on, in FQ, with no placement failure counted by the release's pass.
  EXPECT_EQ(T(waiters_[4]).queue, QueueMembership::kFailure);
  EXPECT_EQ(T(waiters_[4]).placement_failures, failures);
  EXPECT_EQ(sched_->failure_queue_size(), 2u);
  ExpectInvariants();
}

TEST_F(CapacityEventTest, CN115981827A_Claim3_Issue37_T2StillDemotesAndCountsACapacityWaiter) {
  AddNode(MakeNode("n1", 1, 80 * kGiB));
  const TaskId holder = Submit(WholeGpuTask(1));
  sched_->Tick();
  StartAssigned();
  const TaskId a = Submit(WholeGpuTask(1));
  const TaskId b = Submit(WholeGpuTask(1));
  sched_->Tick();
  const int pt = T(b).pt;
  ASSERT_EQ(T(b).placement_failures, 1);
  ASSERT_TRUE(sched_->TaskFinished(holder, 1, 0, 0).ok());
  EXPECT_EQ(sched_->Tick(), 1u);
  EXPECT_EQ(T(a).state, TaskState::kAssigned);  // first in queue order
  // b was re-evaluated too: still in FQ, neither demoted nor counted by that pass.
  EXPECT_EQ(T(b).queue, QueueMembership::kFailure);
  EXPECT_EQ(T(b).pt, pt);
  EXPECT_EQ(T(b).placement_failures, 1);
  // t2 as the claim says: demoted (Pt + 1), back to Q, tried, a placement failure counted.
  AdvanceAlive(sched_->next_failure_flush_ms() - clock_.NowMs());
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_EQ(T(b).pt, pt + 1);
  EXPECT_EQ(T(b).placement_failures, 2);
  EXPECT_EQ(T(b).queue, QueueMembership::kFailure);
  ExpectInvariants();
}

TEST_F(CapacityEventTest, CN115981827A_Claim3_Issue37_AnExecutionFailureStillWaitsForT2) {
  AddNode(MakeNode("n1", 2, 80 * kGiB));
  const TaskId fails = Submit(WholeGpuTask(1));
  const TaskId other = Submit(WholeGpuTask(1));
  ASSERT_EQ(sched_->Tick(), 2u);
  StartAssigned();
  ASSERT_TRUE(sched_->TaskFinished(fails, 1, 1, 0).ok());
  ASSERT_TRUE(sched_->Cancel(other).ok());  // a release: the failed task is not a waiter
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_EQ(T(fails).queue, QueueMembership::kFailure);
  const StatusOr<Explanation> e = sched_->Explain(fails);
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->waits_for.find("in the retry queue after a failure"), std::string::npos)
      << e->waits_for;
  EXPECT_EQ(RunFor(sched_->next_failure_flush_ms() - clock_.NowMs() - 1000), 0u);
  EXPECT_EQ(RunFor(1000), 1u) << "placed by the t2 flush";
  EXPECT_EQ(T(fails).fail_cnt, 1);
}

// The release's pass merges FQ's waiters with Q in queue order (Pt, first submission).
TEST_F(CapacityEventTest, Issue37_TheReleasePassServesQAndFqInQueueOrder) {
  FillAndWait(1);  // waiters_[0] in FQ
  TaskSpec urgent = WholeGpuTask(1);  // Pt 1: more resources, longer (claims 4-6)
  urgent.resources = {32'000, 256 * kGiB};
  urgent.duration_ms = 100 * 3'600'000LL;
  TaskSpec light = testing::SharedTask(500);  // little of everything, short: Pt 5, served late
  light.resources = {1'000, 1 * kGiB};
  light.duration_ms = 60'000;
  ASSERT_TRUE(sched_->Cancel(blocker_).ok());
  const TaskId late = Submit(light);
  const TaskId first = Submit(urgent);
  ASSERT_LT(T(first).pt, T(waiters_[0]).pt);
  ASSERT_GT(T(late).pt, T(waiters_[0]).pt);
  sched_->Tick();
  std::vector<TaskId> order;
  for (const Action& a : sched_->TakeActions()) {
    if (a.kind == Action::Kind::kAssign) order.push_back(a.task);
  }
  EXPECT_EQ(order, (std::vector<TaskId>{first, waiters_[0], late}));
}

TEST_F(CapacityEventTest, CN115981827A_Claim3_Issue37_UncordonPlacesAParkedWaiter) {
  InitLazy();
  FillAndWait(2);
  AddNode(MakeNode("n2", 4, 80 * kGiB));
  ASSERT_TRUE(sched_->Cordon("n2", true).ok());
  sched_->Tick();
  ParkWaiters();
  ASSERT_TRUE(sched_->Cordon("n2", false).ok());
  EXPECT_EQ(sched_->Tick(), 2u);
  for (TaskId w : waiters_) EXPECT_EQ(T(w).placement->node, "n2");
}

TEST_F(CapacityEventTest, Issue37_WhyOfAParkedTaskSaysWhatItWaitsForAndIsRedoneOnUncordon) {
  InitLazy();
  AddNode(MakeNode("n2", 4, 80 * kGiB));
  Submit(WholeGpuTask(4));  // takes n2, which is then cordoned; FillAndWait fills n1
  ASSERT_EQ(sched_->Tick(), 1u);
  StartAssigned();
  ASSERT_TRUE(sched_->Cordon("n2", true).ok());
  FillAndWait(2);
  ParkWaiters();
  StatusOr<Explanation> e = sched_->Explain(waiters_[1]);
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->summary.find("cordoned"), std::string::npos) << e->summary;
  EXPECT_EQ(e->waits_for.rfind("waits for capacity: retried on the next release or within ", 0),
            0u) << e->waits_for;
  EXPECT_EQ(e->summary.rfind(e->waits_for, 0), 0u) << e->summary;
  const int64_t pass = e->pass;
  EXPECT_GT(pass, 0);
  clock_.AdvanceMs(2000);
  EXPECT_EQ(sched_->Explain(waiters_[1])->pass_age_ms, 2000);
  ASSERT_TRUE(sched_->Cordon("n2", false).ok());  // n2 is full: nothing fits, facts changed
  EXPECT_EQ(sched_->Tick(), 0u);
  e = sched_->Explain(waiters_[1]);
  EXPECT_EQ(e->summary.find("cordoned"), std::string::npos) << e->summary;
  EXPECT_NE(e->summary.find("0/2 nodes fit: 2 "), std::string::npos) << e->summary;
  EXPECT_GT(e->pass, pass);
  EXPECT_EQ(e->pass_age_ms, 0);
  EXPECT_EQ(T(waiters_[1]).placement_failures, T(waiters_[0]).placement_failures);
  ExpectInvariants();
}

}  // namespace
}  // namespace gpusched::core
