// The pass as a pure planner (Scheduler::PlanPass) and the commit that applies its plan.

#include <gtest/gtest.h>

#include <string>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;
using testing::WholeGpuTask;

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += std::to_string(x) + ",";
  return out;
}

std::string Render(const PassPlan& plan) {
  std::string out = "decisions " + std::to_string(plan.decisions) + " memo " +
                    std::to_string(plan.memo_hits) + " parallel " +
                    std::to_string(plan.parallel_decisions) + "\n";
  for (const PlanStep& s : plan.steps) {
    out += std::to_string(static_cast<int>(s.kind)) + " " + s.task.ToString() + " " +
           s.placement.node + " [" + Join(s.placement.gpus) + "] " + s.reason + " | " +
           DescribeReport(s.report) + " | victims";
    for (TaskId v : s.victims) out += " " + v.ToString();
    out += "\n";
  }
  for (const std::string& team : plan.teams_classified) out += "team " + team + "\n";
  return out;
}

// Everything a pass could change, as text.
std::string StateOf(const Scheduler& s) {
  std::string out = "Q";
  for (TaskId id : s.MainQueueOrder()) out += " " + id.ToString();
  out += "\nFQ";
  for (TaskId id : s.FailureQueueOrder()) out += " " + id.ToString();
  out += "\n";
  for (const Task* t : s.Tasks()) {
    out += t->id.ToString() + " " + TaskStateName(t->state) + " " + t->reason + " pf " +
           std::to_string(t->placement_failures) + " att " + std::to_string(t->attempts) + " " +
           t->last_report_summary + " " + (t->placement ? t->placement->node : "-") + "\n";
  }
  for (const NodeState& n : s.cluster().nodes()) {
    out += n.name + " cpu " + std::to_string(n.allocated.cpu_milli);
    for (const GpuState& g : n.gpus) out += " " + std::to_string(g.allocated_mib);
    out += "\n";
  }
  const SchedulerStats& st = s.stats();
  out += "passes " + std::to_string(st.passes) + " decisions " + std::to_string(st.decisions) +
         " placed " + std::to_string(st.placed) + " teams " +
         std::to_string(s.team_usage().size()) + "\n";
  return out;
}

class PassPlanTest : public SchedulerTest {
 protected:
  // Plans twice, checks both plans agree and nothing changed, then runs the pass and checks
  // it applied exactly that plan. Returns the plan.
  PassPlan PlanTwiceThenSchedule() {
    sched_->TakeActions();
    sched_->TakeChangedTasks();
    const std::string before = StateOf(*sched_);
    const PassPlan first = sched_->PlanPass();
    const PassPlan second = sched_->PlanPass();
    EXPECT_EQ(Render(first), Render(second));
    EXPECT_EQ(StateOf(*sched_), before);
    EXPECT_TRUE(sched_->TakeActions().empty());
    EXPECT_TRUE(sched_->TakeChangedTasks().empty());

    const size_t placed = sched_->Schedule();
    size_t assigns = 0;
    for (const PlanStep& step : first.steps) {
      const Task& t = T(step.task);
      switch (step.kind) {
        case PlanStep::Kind::kAssign:
        case PlanStep::Kind::kReclaim:
        case PlanStep::Kind::kPreempt:
          ++assigns;
          EXPECT_TRUE(t.placement.has_value()) << t.id.ToString();
          if (t.placement) {
            EXPECT_EQ(t.placement->node, step.placement.node);
            EXPECT_EQ(t.placement->gpus, step.placement.gpus);
          }
          for (TaskId v : step.victims) EXPECT_EQ(T(v).state, TaskState::kPending);
          break;
        case PlanStep::Kind::kWait:
        case PlanStep::Kind::kQuotaWait:
          EXPECT_FALSE(t.placement.has_value()) << t.id.ToString();
          EXPECT_EQ(t.last_report_summary.rfind(step.reason, 0), 0u) << t.last_report_summary;
          break;
        case PlanStep::Kind::kParkedWait:  // a parked group waits again, unvisited
          EXPECT_FALSE(t.placement.has_value()) << t.id.ToString();
          break;
      }
    }
    EXPECT_EQ(placed, assigns);
    ExpectInvariants();
    return first;
  }
};

TEST_F(PassPlanTest, PlanningIsPureAndTheCommitAppliesExactlyThePlan) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("b", 1, 16 * kGiB));
  const TaskId x = Submit(SharedTask(6 * kGiB));
  sched_->Schedule();
  ASSERT_TRUE(T(x).placement.has_value());
  const TaskId t1 = Submit(SharedTask(10 * kGiB));
  const TaskId t2 = Submit(SharedTask(10 * kGiB));  // sees t1's planned reservation
  const TaskId t3 = Submit(SharedTask(10 * kGiB));
  TaskSpec wide = WholeGpuTask(2);
  wide.keep_pending_if_infeasible = true;
  const TaskId t4 = Submit(wide);
  const TaskId t5 = Submit(SharedTask(4 * kGiB));

  const PassPlan plan = PlanTwiceThenSchedule();
  ASSERT_EQ(plan.steps.size(), 5u);
  EXPECT_EQ(plan.steps[0].task, t1);
  EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kAssign);
  EXPECT_EQ(plan.steps[1].task, t2);
  EXPECT_EQ(plan.steps[1].kind, PlanStep::Kind::kAssign);
  EXPECT_NE(plan.steps[0].placement.node, plan.steps[1].placement.node);
  EXPECT_EQ(plan.steps[2].task, t3);
  EXPECT_EQ(plan.steps[2].kind, PlanStep::Kind::kWait);
  EXPECT_EQ(plan.steps[2].reason, "0/2 nodes fit: 2 insufficient GPU memory");
  EXPECT_EQ(plan.steps[3].task, t4);
  EXPECT_EQ(plan.steps[3].kind, PlanStep::Kind::kWait);
  EXPECT_EQ(plan.steps[3].reason, "0/2 nodes fit: 2 too few GPUs");
  EXPECT_EQ(plan.steps[4].task, t5);  // fits in what t1 left
  EXPECT_EQ(plan.steps[4].kind, PlanStep::Kind::kAssign);
  EXPECT_EQ(plan.decisions, 5);
  EXPECT_EQ(sched_->failure_queue_size(), 2u);  // kFailureQueue: t3 and t4 wait in FQ
}

// A request shape that found no node is not scanned again in the same pass: the attempt
// counts as a decision and as a memo hit, never as an evaluation of its own.
TEST_F(PassPlanTest, MemoHitsAreCountedApartFromEvaluations) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  Submit(SharedTask(10 * kGiB));
  sched_->Schedule();  // 6 GiB left
  const int64_t decisions_before = sched_->stats().decisions;
  for (int i = 0; i < 3; ++i) Submit(SharedTask(10 * kGiB));  // one scan, then the memo
  Submit(SharedTask(12 * kGiB));                               // another shape: scanned
  const PassPlan plan = PlanTwiceThenSchedule();
  EXPECT_EQ(plan.decisions, 4);
  EXPECT_EQ(plan.memo_hits, 2);
  EXPECT_EQ(sched_->stats().decisions - decisions_before, 4);
  EXPECT_EQ(sched_->stats().memo_hits, 2);
  ASSERT_EQ(plan.steps.size(), 4u);
  for (const PlanStep& step : plan.steps) {  // a memo hit answers as its scan did
    EXPECT_EQ(step.kind, PlanStep::Kind::kWait);
    EXPECT_EQ(step.reason, "0/1 nodes fit: 1 insufficient GPU memory");
  }

  SchedulerConfig no_memo;
  no_memo.memoize_failed_shapes = false;
  Init(no_memo);
  AddNode(MakeNode("a", 1, 16 * kGiB));
  Submit(SharedTask(10 * kGiB));
  sched_->Schedule();
  for (int i = 0; i < 3; ++i) Submit(SharedTask(10 * kGiB));
  const PassPlan uncached = sched_->PlanPass();
  EXPECT_EQ(uncached.decisions, 3);
  EXPECT_EQ(uncached.memo_hits, 0);
}

TEST_F(PassPlanTest, ReclaimAndQuotaWaitsArePlannedWithoutStoppingAnything) {
  AddNode(MakeNode("n1", 4, 80 * kGiB));
  TeamQuota a;
  a.team = "a";
  a.guaranteed_gpus = 4;
  a.borrow_gpus = 0;
  TeamQuota b = a;
  b.team = "b";
  b.guaranteed_gpus = 0;
  b.borrow_gpus = 3;
  ASSERT_TRUE(sched_->SetQuota(a).ok());
  ASSERT_TRUE(sched_->SetQuota(b).ok());
  std::vector<TaskId> borrowed;
  for (int i = 0; i < 3; ++i) {
    TaskSpec spec = WholeGpuTask(1);
    spec.team = "b";
    borrowed.push_back(Submit(spec));
    sched_->Schedule();
    StartAssigned();
    AdvanceAlive(1000);
  }
  TaskSpec owner = WholeGpuTask(2);
  owner.team = "a";
  const TaskId a1 = Submit(owner);
  TaskSpec more = WholeGpuTask(2);
  more.team = "b";
  const TaskId b4 = Submit(more);  // 2 held + 2 > its limit of 3

  const PassPlan plan = PlanTwiceThenSchedule();
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kReclaim);
  EXPECT_EQ(plan.steps[0].task, a1);
  EXPECT_EQ(plan.steps[0].victims, std::vector<TaskId>{borrowed[2]});  // the newest
  EXPECT_EQ(plan.steps[1].kind, PlanStep::Kind::kQuotaWait);
  EXPECT_EQ(plan.steps[1].task, b4);
  EXPECT_EQ(sched_->stats().reclaims, 1);
}

}  // namespace
}  // namespace gpusched::core
