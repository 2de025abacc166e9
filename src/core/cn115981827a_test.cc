// CN115981827A: priority queue Q, failure queue FQ, pre-filtering and node choice
// (PATENTS.md section 4 tests 2-8, and the product decisions of section 6).

#include <gtest/gtest.h>

#include "base/executor.h"
#include "base/rng.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;

constexpr int64_t kHour = 3'600'000;

TaskSpec WithPt(int pt) {
  TaskSpec t;
  t.gpus = 1;
  switch (pt) {
    case 1: t.gpu_mem_mib = 8 * kGiB; t.resources = {16'000, 16 * kGiB}; t.duration_ms = 48 * kHour; break;
    case 3: t.gpu_mem_mib = 2 * kGiB; t.resources = {4'000, 4 * kGiB}; t.duration_ms = 8 * kHour; break;
    case 5: t.gpu_mem_mib = 500; t.resources = {1'000, 1 * kGiB}; t.duration_ms = kHour / 2; break;
  }
  return t;
}

class CN115981827ATest : public SchedulerTest {};

TEST_F(CN115981827ATest, Claim2_QueueServedInPtThenSubmissionOrder) {
  AddNode(MakeNode("n1", 8, 80 * kGiB));
  const TaskId a = Submit(WithPt(3)), b = Submit(WithPt(1)), c = Submit(WithPt(5)),
               d = Submit(WithPt(3));
  EXPECT_EQ(T(a).pt, 3);
  EXPECT_EQ(T(b).pt, 1);
  EXPECT_EQ(T(c).pt, 5);
  EXPECT_EQ(sched_->Schedule(), 4u);
  std::vector<TaskId> order;
  for (const Action& x : sched_->TakeActions()) order.push_back(x.task);
  EXPECT_EQ(order, (std::vector<TaskId>{b, a, d, c}));
}

TEST_F(CN115981827ATest, Claim3_FailureQueueDemotesAndGivesUpAfterFailMax) {
  SchedulerConfig config;
  config.fail_max = 2;
  Init(config);
  AddNode(MakeNode("n1", 1, 80 * kGiB));
  const TaskId id = Submit(WithPt(3));
  const DurationMs t2 = sched_->config().t2_ms;
  for (int failure = 1; failure <= 3; ++failure) {
    ASSERT_EQ(sched_->Tick(), 1u) << "attempt " << failure;
    auto actions = StartAssigned();
    ASSERT_EQ(actions.size(), 1u);
    ASSERT_TRUE(sched_->TaskFinished(id, actions[0].attempt, 1, 0).ok());
    EXPECT_EQ(T(id).fail_cnt, failure);
    EXPECT_EQ(T(id).claim, ClaimStatus::kFailed);
    if (failure == 3) break;
    // fail_cnt <= FAIL_MAX: parked in FQ until the next t2, then Pt + 1 and back in Q.
    EXPECT_EQ(T(id).queue, QueueMembership::kFailure);
    EXPECT_EQ(sched_->failure_queue_size(), 1u);
    EXPECT_EQ(sched_->Tick(), 0u);
    const int pt_before = T(id).pt;
    // Passes run all along (every t1) on an idle node: a task let out of FQ early would be
    // placed by one of them.
    EXPECT_EQ(RunFor(t2 - 1000), 0u) << "placed before t2";
    EXPECT_EQ(T(id).queue, QueueMembership::kFailure) << "left FQ before t2";
    EXPECT_EQ(T(id).pt, pt_before) << "demoted before t2";
    clock_.AdvanceMs(1000);
    Heartbeat("n1");
    ASSERT_EQ(sched_->Tick(), 1u);  // FQ -> Q (demoted), placed in the same tick's pass
    EXPECT_EQ(T(id).pt, pt_before + 1);
    sched_->Cancel(TaskId(999)).ok();  // unknown id: no effect
    // Undo the placement made by this tick so the loop's own Tick() places it again.
    auto replay = sched_->TakeActions();
    ASSERT_EQ(replay.size(), 1u);
    ASSERT_TRUE(sched_->Drain("n1", true).ok());
    ASSERT_TRUE(sched_->Cordon("n1", false).ok());
    sched_->TakeActions();
  }
  // fail_cnt = 3 > FAIL_MAX = 2: dropped, in neither queue, status 1, reason kept.
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).queue, QueueMembership::kNone);
  EXPECT_EQ(sched_->main_queue_size(), 0u);
  EXPECT_EQ(sched_->failure_queue_size(), 0u);
  EXPECT_EQ(T(id).claim, ClaimStatus::kFailed);
  EXPECT_NE(T(id).reason.find("exited with code 1"), std::string::npos) << T(id).reason;
  ExpectInvariants();
}

TEST_F(CN115981827ATest, Claim9_UnreachableNodeIsNeverChosen) {
  AddNode(MakeNode("big", 8, 80 * kGiB));
  AddNode(MakeNode("small", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->SetNodeReachable("big", false).ok());
  const TaskId id = Submit(SharedTask(4 * kGiB));
  sched_->Schedule();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, "small");
  EXPECT_EQ(T(id).last_report.rejected[kFilterReachable], 1);
}

TEST_F(CN115981827ATest, Claim1_NodeWithoutEnoughGpuMemoryIsFilteredOut) {
  SchedulerConfig scan;
  scan.placement.index = false;  // the literal filter over every node, counted
  Init(scan);
  AddNode(MakeNode("a", 1, 8 * kGiB));
  AddNode(MakeNode("b", 1, 40 * kGiB));
  const TaskId id = Submit(SharedTask(10 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(id).placement->node, "b");
  EXPECT_EQ(T(id).last_report.feasible_nodes, 1);
  EXPECT_EQ(T(id).last_report.rejected[kFilterGpuMemory], 1);
}

TEST_F(CN115981827ATest, Claim1_UntoleratedTaintFilteredThenHighestScoreWins) {
  NodeSpec tainted = MakeNode("a-tainted", 8, 80 * kGiB);
  tainted.taints.push_back({"dedicated", "infer", TaintEffect::kNoSchedule});
  AddNode(tainted);
  AddNode(MakeNode("b-busy", 8, 80 * kGiB));
  AddNode(MakeNode("c-idle", 8, 80 * kGiB));
  // Load b-busy so c-idle scores higher under LeastAllocated.
  TaskSpec filler = SharedTask(60 * kGiB);
  filler.node_selector = {};
  const TaskId f = Submit(filler);
  sched_->Schedule();
  ASSERT_TRUE(T(f).placement.has_value());
  const std::string loaded = T(f).placement->node;
  EXPECT_NE(loaded, "a-tainted");
  const TaskId id = Submit(SharedTask(4 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(id).last_report.rejected[kFilterTaintToleration], 1);
  EXPECT_NE(T(id).placement->node, loaded);
  EXPECT_NE(T(id).placement->node, "a-tainted");
  // With a matching toleration the tainted node is allowed again.
  TaskSpec tolerant = SharedTask(4 * kGiB);
  tolerant.tolerations.push_back({"dedicated", "infer", false, true, TaintEffect::kNoSchedule});
  const TaskId t2 = Submit(tolerant);
  sched_->Schedule();
  EXPECT_EQ(T(t2).last_report.rejected[kFilterTaintToleration], 0);
}

// Claim 1's pre-filtering: above N_par the filter runs in parallel chunks with the same result.
TEST_F(CN115981827ATest, Claim1_ParallelFilterAboveNparGivesIdenticalResult) {
  ThreadPool pool(4);
  Rng rng(7);
  std::printf("seed 7\n");
  for (int nodes : {100, 101, 333}) {
    // Two schedulers over the same cluster scanning every node: one sequential, one with a
    // pool; a third decides through the node index (issue 43), with the same placements.
    FakeClock clock(0);
    SchedulerConfig scan;
    scan.placement.index = false;
    auto seq = Scheduler::Create(scan, clock);
    auto par = Scheduler::Create(scan, clock, &pool);
    auto idx = Scheduler::Create({}, clock, &pool);
    ASSERT_TRUE(seq.ok() && par.ok() && idx.ok());
    for (int i = 0; i < nodes; ++i) {
      NodeSpec n = MakeNode("n" + std::to_string(i), 8, 80 * kGiB);
      if (rng.Bernoulli(0.2)) n.taints.push_back({"k", "v", TaintEffect::kNoSchedule});
      ASSERT_TRUE((*seq)->RegisterNode(n).ok());
      ASSERT_TRUE((*par)->RegisterNode(n).ok());
      ASSERT_TRUE((*idx)->RegisterNode(n).ok());
    }
    for (int i = 0; i < 300; ++i) {
      TaskSpec t = SharedTask(rng.UniformInt(1, 80) * kGiB);
      if (rng.Bernoulli(0.3)) t = testing::WholeGpuTask(static_cast<int>(rng.UniformInt(1, 8)));
      ASSERT_TRUE((*seq)->Submit(t).ok());
      ASSERT_TRUE((*par)->Submit(t).ok());
      ASSERT_TRUE((*idx)->Submit(t).ok());
    }
    (*seq)->Schedule();
    (*par)->Schedule();
    (*idx)->Schedule();
    for (uint64_t id = 1; id <= 300; ++id) {
      const Task* a = (*seq)->GetTask(TaskId(id));
      const Task* b = (*par)->GetTask(TaskId(id));
      ASSERT_EQ(a->placement.has_value(), b->placement.has_value()) << "task " << id;
      const Task* c = (*idx)->GetTask(TaskId(id));
      ASSERT_EQ(a->placement.has_value(), c->placement.has_value()) << "task " << id;
      if (a->placement) {
        EXPECT_EQ(a->placement->node, b->placement->node);
        EXPECT_EQ(a->placement->gpus, b->placement->gpus);
        EXPECT_EQ(a->placement->node, c->placement->node);
        EXPECT_EQ(a->placement->gpus, c->placement->gpus);
      }
      EXPECT_EQ(a->last_report.rejected, b->last_report.rejected);
      EXPECT_EQ(a->last_report.feasible_nodes, b->last_report.feasible_nodes);
      if (id == 1) {
        // |M| = 100 runs sequentially; above N_par in W = 16 chunks.
        EXPECT_EQ(b->last_report.chunks_used, nodes > 100 ? 16u : 1u);
      }
    }
  }
}

// CN115981827A claim 1: P = |M| > N_par ? parallel : sequential, where M is the set the probe
// daemon marks reachable, not every registered node. 150 nodes with 60 unreachable (|M| = 90)
// filter sequentially; with 49 unreachable (|M| = 101) in W chunks, with the same answer.
TEST_F(CN115981827ATest, Claim1_ParallelThresholdCountsOnlyTheReachableSetM) {
  ThreadPool pool(2);
  SchedulerConfig scan;
  scan.placement.index = false;  // the parallel filter serves the scan
  Init(scan, &pool);
  for (int i = 0; i < 150; ++i) AddNode(MakeNode("n" + std::to_string(100 + i), 1, 16 * kGiB));
  // Marks nodes n[100+from, 100+to) reachable or not, then places one small task.
  auto place_after = [&](int from, int to, bool reachable) -> const Task& {
    for (int i = from; i < to; ++i) {
      EXPECT_TRUE(sched_->SetNodeReachable("n" + std::to_string(100 + i), reachable).ok());
    }
    const TaskId id = Submit(SharedTask(kGiB));
    sched_->Schedule();
    return T(id);
  };
  const Task& first = place_after(0, 60, false);
  EXPECT_EQ(sched_->cluster().reachable_count(), 90u);
  EXPECT_EQ(first.last_report.chunks_used, 1u) << "|M| = 90 <= N_par runs sequentially";
  EXPECT_EQ(first.last_report.rejected[kFilterReachable], 60);
  EXPECT_EQ(first.placement->node, "n160");  // ties by name among the reachable
  const Task& second = place_after(49, 60, true);
  EXPECT_EQ(sched_->cluster().reachable_count(), 101u);
  EXPECT_EQ(second.last_report.chunks_used, 16u) << "|M| = 101 > N_par runs in W chunks";
  EXPECT_EQ(second.last_report.rejected[kFilterReachable], 49);
  EXPECT_EQ(second.placement->node, "n149");
}

// PATENTS.md section 4, test 8: status 2 while waiting, assigned and running (the outcome is
// not known yet), 0 only once the task executed successfully (issue 37: it was set at
// assignment, so a task that then failed had been reported "executed successfully").
TEST_F(CN115981827ATest, CN115981827A_Claim7_StatusZeroMeansExecutedSuccessfully) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(kGiB));
  EXPECT_EQ(T(id).claim, ClaimStatus::kWaiting);
  sched_->Schedule();
  EXPECT_EQ(T(id).state, TaskState::kAssigned);
  EXPECT_EQ(T(id).claim, ClaimStatus::kWaiting) << "assigned is not executed successfully";
  ASSERT_TRUE(sched_->TaskStarted(id, 1).ok());
  EXPECT_EQ(T(id).claim, ClaimStatus::kWaiting);
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 0, 0).ok());
  EXPECT_EQ(T(id).claim, ClaimStatus::kScheduled);
}

TEST_F(CN115981827ATest, CN115981827A_Claim7_StatusGoesFromTwoToOneOnFailure) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  const TaskId blocked = Submit(SharedTask(12 * kGiB));
  EXPECT_EQ(T(blocked).claim, ClaimStatus::kWaiting);
  sched_->Schedule();
  EXPECT_EQ(T(id).claim, ClaimStatus::kWaiting);
  EXPECT_EQ(T(blocked).claim, ClaimStatus::kFailed);  // scheduling failed
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 1, 0).ok());
  EXPECT_EQ(T(id).claim, ClaimStatus::kFailed);  // execution failed, never 0 on the way
}

// The one node with the label is cordoned: that is the reason, not a selector no node
// matches (it said "no node matches the node selector zone=a").
TEST_F(CN115981827ATest, Claim1_ACordonedNodeThatMatchesTheSelectorIsNamed) {
  NodeSpec a = MakeNode("gpu-a", 1, 16 * kGiB);
  a.labels = {{"zone", "a"}};
  AddNode(a);
  AddNode(MakeNode("gpu-b", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->Cordon("gpu-a", true).ok());
  TaskSpec spec = SharedTask(kGiB);
  spec.node_selector = {{"zone", "a"}};
  const TaskId id = Submit(spec);
  EXPECT_EQ(sched_->Tick(), 0u);
  auto why = sched_->Explain(id);
  ASSERT_TRUE(why.ok());
  EXPECT_NE(why->summary.find("the node selector zone=a matches gpu-a, which is cordoned"),
            std::string::npos)
      << why->summary;
  EXPECT_EQ(why->summary.find("no node matches"), std::string::npos) << why->summary;
}

// `why` and the pending reason name the rule that leaves no node (the selector), and a node
// that joins with the label takes the task.
TEST_F(CN115981827ATest, Claim1_NoNodeMatchesTheSelectorIsTheReasonUntilOneJoins) {
  NodeSpec b = MakeNode("gpu-b", 1, 16 * kGiB);
  b.labels = {{"zone", "b"}};
  AddNode(b);
  TaskSpec spec = SharedTask(kGiB);
  spec.node_selector = {{"zone", "a"}};
  const TaskId id = Submit(spec);
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_EQ(T(id).last_report.rejected[kFilterNodeSelector], 1);
  EXPECT_NE(T(id).reason.find("no node matches the node selector zone=a"), std::string::npos)
      << T(id).reason;
  auto why = sched_->Explain(id);
  ASSERT_TRUE(why.ok());
  EXPECT_NE(why->summary.find("no node matches the node selector zone=a"), std::string::npos)
      << why->summary;
  NodeSpec a = MakeNode("gpu-a", 1, 16 * kGiB);
  a.labels = {{"zone", "a"}, {"rack", "7"}};
  AddNode(a);
  AdvanceAlive(sched_->config().t2_ms);
  EXPECT_EQ(sched_->Tick(), 1u);
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, "gpu-a");
}

TEST_F(CN115981827ATest, Claim1_UntoleratedTaintIsNamedInTheReasonAndATolerationPlaces) {
  NodeSpec n = MakeNode("gpu1", 1, 16 * kGiB);
  n.taints = {{"dedicated", "infer", TaintEffect::kNoSchedule},
              {"spot", "", TaintEffect::kPreferNoSchedule}};
  AddNode(n);
  const TaskId plain = Submit(SharedTask(kGiB));
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_NE(T(plain).reason.find("every node left has a taint the task does not tolerate: gpu1 "
                                 "has dedicated=infer:NoSchedule (submit with --toleration "
                                 "dedicated=infer:NoSchedule)"),
            std::string::npos)
      << T(plain).reason;
  TaskSpec tolerant = SharedTask(kGiB);
  tolerant.tolerations = {{"dedicated", "infer", false, true, TaintEffect::kNoSchedule}};
  const TaskId id = Submit(tolerant);
  EXPECT_EQ(sched_->Tick(), 1u);
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, "gpu1");
  EXPECT_FALSE(T(plain).placement.has_value());
}

// PATENTS.md section 6: waiting for capacity goes through FQ but is not an execution failure,
// and a release of capacity re-evaluates it in the pass it triggers (issue 37), not at t2.
TEST_F(CN115981827ATest, Section6_CapacityWaitCountsPlacementFailuresAndAReleaseRetriesIt) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  // One FQ period first: the wait below is timed by the t2 cycle itself, not by the first
  // flush the scheduler's creation scheduled.
  ASSERT_EQ(RunFor(sched_->config().t2_ms), 0u);
  const TaskId big = Submit(SharedTask(12 * kGiB));
  const TaskId waits = Submit(SharedTask(12 * kGiB));
  ASSERT_EQ(sched_->Tick(), 1u);
  EXPECT_EQ(T(waits).queue, QueueMembership::kFailure);
  EXPECT_EQ(T(waits).placement_failures, 1);
  EXPECT_EQ(T(waits).fail_cnt, 0);
  StartAssigned();
  // Passes run every t1 while the GPU is taken: FQ keeps the task, nothing counts.
  EXPECT_EQ(RunFor(sched_->config().t2_ms - 1000), 0u);
  EXPECT_EQ(T(waits).queue, QueueMembership::kFailure);
  EXPECT_EQ(T(waits).placement_failures, 1);
  ASSERT_TRUE(sched_->TaskFinished(big, 1, 0, 0).ok());
  // The release's pass, at the same instant, places it: no GPU idles until t2.
  EXPECT_EQ(sched_->Tick(), 1u);
  EXPECT_EQ(T(waits).state, TaskState::kAssigned);
  EXPECT_EQ(T(waits).placement_failures, 1);
  EXPECT_EQ(T(waits).fail_cnt, 0);
}

TEST_F(CN115981827ATest, Section6_LiteralPlacementLimitGivesUpWithReason) {
  SchedulerConfig config;
  config.max_placement_failures = 2;
  Init(config);
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  Submit(SharedTask(12 * kGiB));
  const TaskId waits = Submit(SharedTask(12 * kGiB));
  sched_->Schedule();
  AdvanceAlive(config.t2_ms);
  sched_->Tick();
  EXPECT_EQ(T(waits).state, TaskState::kFailed);
  EXPECT_EQ(T(waits).placement_failures, 2);
  EXPECT_NE(T(waits).reason.find("insufficient GPU memory"), std::string::npos) << T(waits).reason;
  ExpectInvariants();
}

TEST_F(CN115981827ATest, Section6_DemotionIsCappedAndKeepsSubmissionOrderInBand) {
  SchedulerConfig config;
  config.max_priority_value = 6;
  Init(config);
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId holder = Submit(SharedTask(16 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TaskId first = Submit(WithPt(5));
  sched_->Tick();  // no room: FQ
  for (int i = 0; i < 3; ++i) {
    AdvanceAlive(config.t2_ms);
    sched_->Tick();
  }
  EXPECT_EQ(T(first).pt, 6);  // 5 + three demotions, capped at 6
  const TaskId later = Submit(WithPt(5));
  sched_->Tick();
  AdvanceAlive(config.t2_ms);
  sched_->Tick();
  EXPECT_EQ(T(later).pt, 6);
  ASSERT_TRUE(sched_->TaskFinished(holder, 1, 0, 0).ok());
  AdvanceAlive(config.t2_ms);
  ASSERT_GE(sched_->Tick(), 1u);
  // Both are in band 6; the earlier submission goes first although it was demoted longer.
  auto actions = sched_->TakeActions();
  ASSERT_FALSE(actions.empty());
  EXPECT_EQ(actions[0].task, first);
}

TEST_F(CN115981827ATest, Section6_EventDrivenPassDoesNotWaitForT1) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(kGiB));
  EXPECT_EQ(sched_->Tick(), 1u);  // same instant: the submission asked for a pass
  EXPECT_EQ(T(id).state, TaskState::kAssigned);
  EXPECT_EQ(sched_->Tick(), 0u);  // nothing changed, t1 not elapsed: no pass
  EXPECT_EQ(sched_->stats().passes, 1);
}

// CN115981827A claim 2: Q is polled every t1 even when nothing happens at all (no
// submission, release, heartbeat or node change asks for a pass).
TEST_F(CN115981827ATest, Claim2_PassRunsAtT1WithoutAnyEvent) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  Submit(SharedTask(kGiB));
  ASSERT_EQ(sched_->Tick(), 1u);  // the submission's pass
  ASSERT_EQ(sched_->stats().passes, 1);
  const DurationMs t1 = sched_->config().t1_ms;
  clock_.AdvanceMs(t1 - 1);
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_EQ(sched_->stats().passes, 1) << "a pass before t1 without an event";
  clock_.AdvanceMs(1);
  sched_->Tick();
  EXPECT_EQ(sched_->stats().passes, 2) << "no pass at t1";
  clock_.AdvanceMs(t1);
  sched_->Tick();
  EXPECT_EQ(sched_->stats().passes, 3) << "no pass at 2 x t1";
}

// Section 6: with no reachable node (before the first agent registers, or after a restore
// until one reconnects) there is nothing to decide. The literal claim 3 would fail every task
// and park it in FQ for t2, so a task submitted a moment before the first agent would wait
// 30 s after it came; instead no pass runs and the tasks keep their place in Q.
TEST_F(CN115981827ATest, Section6_WithNoNodeReachableTasksWaitInQAndTheFirstNodePlacesThem) {
  const TaskId a = Submit(SharedTask(kGiB));
  const TaskId b = Submit(SharedTask(kGiB));
  EXPECT_EQ(RunFor(3 * sched_->config().t1_ms), 0u);
  for (TaskId id : {a, b}) {
    EXPECT_EQ(T(id).queue, QueueMembership::kMain);
    EXPECT_EQ(T(id).placement_failures, 0);
    EXPECT_EQ(T(id).claim, ClaimStatus::kWaiting);
  }
  EXPECT_EQ(sched_->stats().passes, 0);
  AddNode(MakeNode("n1", 2, 16 * kGiB));
  EXPECT_EQ(sched_->Tick(), 2u);  // the registration's pass, at the same instant
  EXPECT_EQ(T(a).state, TaskState::kAssigned);
  EXPECT_EQ(T(b).state, TaskState::kAssigned);
}

TEST_F(CN115981827ATest, Section6_WhileEveryNodeIsUnreachableTasksWaitInQ) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->SetNodeReachable("n1", false).ok());
  const TaskId id = Submit(SharedTask(kGiB));
  EXPECT_EQ(sched_->Tick(), 0u);
  EXPECT_EQ(T(id).queue, QueueMembership::kMain);
  EXPECT_EQ(T(id).placement_failures, 0);
  ASSERT_TRUE(sched_->SetNodeReachable("n1", true).ok());
  EXPECT_EQ(sched_->Tick(), 1u);
  EXPECT_EQ(T(id).state, TaskState::kAssigned);
}

// After a restore the server awaits the known nodes (ControlPlane::Restore): the first agent
// to reconnect does not get a pass that parks in FQ what the others are about to take.
class RestoredNodesTest : public CN115981827ATest {
 protected:
  // Nodes a and b of one GPU each, as a restore leaves them (unreachable, awaited for 4 s),
  // two one-GPU tasks in Q, and a back.
  void SetUp() override {
    CN115981827ATest::SetUp();
    for (const char* n : {"a", "b"}) {
      AddNode(MakeNode(n, 1, 16 * kGiB));
      ASSERT_TRUE(sched_->SetNodeReachable(n, false).ok());
    }
    sched_->AwaitNodes({"a", "b"}, clock_.NowMs() + 4000);
    x = Submit(testing::WholeGpuTask(1));
    y = Submit(testing::WholeGpuTask(1));
    ASSERT_TRUE(sched_->SetNodeReachable("a", true).ok());
  }
  TaskId x, y;
};

TEST_F(RestoredNodesTest, CN115981827A_Section6_AfterARestorePassesAwaitTheKnownNodes) {
  EXPECT_EQ(sched_->Tick(), 0u) << "a pass before b reconnected";
  EXPECT_EQ(T(y).queue, QueueMembership::kMain);
  EXPECT_EQ(T(y).placement_failures, 0);
  ASSERT_TRUE(sched_->SetNodeReachable("b", true).ok());
  EXPECT_EQ(sched_->Tick(), 2u);
  EXPECT_EQ(T(x).state, TaskState::kAssigned);
  EXPECT_EQ(T(y).state, TaskState::kAssigned);
}

TEST_F(RestoredNodesTest, CN115981827A_Section6_ANodeNotBackIsAwaitedOnlyUntilTheDeadline) {
  clock_.AdvanceMs(3999);
  EXPECT_EQ(sched_->Tick(), 0u);
  clock_.AdvanceMs(1);  // the deadline is due a pass, though t1 has not passed since
  EXPECT_EQ(sched_->Tick(), 1u);
  EXPECT_EQ(T(x).state, TaskState::kAssigned);
  EXPECT_EQ(T(y).queue, QueueMembership::kFailure);  // claim 3 as before: b is not there
  EXPECT_EQ(T(y).placement_failures, 1);
}

TEST_F(CN115981827ATest, Section6_StayQueuedStartsAsSoonAsCapacityFrees) {
  SchedulerConfig config;
  config.capacity_wait = CapacityWait::kStayQueued;
  Init(config);
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId a = Submit(SharedTask(12 * kGiB));
  const TaskId b = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  EXPECT_EQ(T(b).queue, QueueMembership::kMain);
  StartAssigned();
  ASSERT_TRUE(sched_->TaskFinished(a, 1, 0, 0).ok());
  EXPECT_EQ(sched_->Tick(), 1u);  // no t2 wait
  EXPECT_EQ(T(b).state, TaskState::kAssigned);
}

}  // namespace
}  // namespace gpusched::core
