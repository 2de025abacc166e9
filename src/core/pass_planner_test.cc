// The pass planner (issue 40): a PassPlanner over a scheduler's state plans the pass that
// Scheduler::PlanPass reports, and changes nothing of that state.

#include "core/pass_planner.h"

#include <gtest/gtest.h>

#include <string>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;
using testing::WholeGpuTask;

std::string Render(const PassPlan& plan) {
  std::string out = "decisions " + std::to_string(plan.decisions) + " memo " +
                    std::to_string(plan.memo_hits) + "\n";
  for (const PlanStep& s : plan.steps) {
    out += std::to_string(static_cast<int>(s.kind)) + " " + s.task.ToString() + " " +
           s.placement.node + " " + std::to_string(s.placement.gpus.size()) + " " + s.reason +
           " | " + DescribeReport(s.report) + " | victims";
    for (TaskId v : s.victims) out += " " + v.ToString();
    out += " | ranks";
    for (const Placement& g : s.gang) out += " " + g.node;
    out += "\n";
  }
  if (plan.reservation) out += "reservation " + plan.reservation->task.ToString() + "\n";
  return out;
}

// The queues, tasks and cluster as text: what a plan must leave as it found it.
std::string StateOf(const Scheduler& s) {
  std::string out = "Q";
  for (TaskId id : s.MainQueueOrder()) out += " " + id.ToString();
  out += "\nFQ";
  for (TaskId id : s.FailureQueueOrder()) out += " " + id.ToString();
  out += "\n";
  for (const Task* t : s.Tasks()) {
    out += t->id.ToString() + " " + TaskStateName(t->state) + " " + t->reason + " pf " +
           std::to_string(t->placement_failures) + " " + t->last_report_summary + " " +
           (t->placement ? t->placement->node : "-") + "\n";
  }
  for (const NodeState& n : s.cluster().nodes()) {
    out += n.name + " cpu " + std::to_string(n.allocated.cpu_milli);
    for (const GpuState& g : n.gpus) out += " " + std::to_string(g.allocated_mib);
    out += "\n";
  }
  out += "decisions " + std::to_string(s.stats().decisions) + " reservation " +
         (s.reservation() ? s.reservation()->task.ToString() : "-") + "\n";
  return out;
}

class PassPlannerTest : public testing::SchedulerTest {
 protected:
  // Plans with a PassPlanner twice; checks both plans are PlanPass's and nothing changed.
  PassPlan PlanUnchanged() {
    const std::string before = StateOf(*sched_);
    const PassPlanner planner(*sched_);
    const PassPlan first = planner.Plan();
    EXPECT_EQ(StateOf(*sched_), before);
    EXPECT_EQ(Render(planner.Plan()), Render(first));
    EXPECT_EQ(Render(sched_->PlanPass()), Render(first));
    EXPECT_EQ(StateOf(*sched_), before);
    EXPECT_TRUE(sched_->TakeActions().empty());
    return first;
  }
};

TEST_F(PassPlannerTest, Issue40_PlansThePassPlanPassReportsAndChangesNothing) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("b", 1, 16 * kGiB));
  const TaskId x = Submit(SharedTask(6 * kGiB));
  sched_->Schedule();
  ASSERT_TRUE(T(x).placement.has_value());
  sched_->TakeActions();
  const TaskId t1 = Submit(SharedTask(10 * kGiB));
  const TaskId t2 = Submit(SharedTask(10 * kGiB));
  const TaskId t3 = Submit(SharedTask(10 * kGiB));  // no room left: waits
  const PassPlan plan = PlanUnchanged();
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].task, t1);
  EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kAssign);
  EXPECT_EQ(plan.steps[1].task, t2);
  EXPECT_EQ(plan.steps[1].kind, PlanStep::Kind::kAssign);
  EXPECT_NE(plan.steps[0].placement.node, plan.steps[1].placement.node);
  EXPECT_EQ(plan.steps[2].task, t3);
  EXPECT_EQ(plan.steps[2].kind, PlanStep::Kind::kWait);
  EXPECT_EQ(plan.steps[2].reason, "0/2 nodes fit: 2 insufficient GPU memory");
  // The pass applies what the planner planned.
  EXPECT_EQ(sched_->Schedule(), 2u);
  EXPECT_EQ(T(t1).placement->node, plan.steps[0].placement.node);
  EXPECT_EQ(T(t2).placement->node, plan.steps[1].placement.node);
  EXPECT_FALSE(T(t3).placement.has_value());
}

TEST_F(PassPlannerTest, Issue40_PlansAGangOnDistinctNodesWithoutReservingThem) {
  for (int i = 0; i < 3; ++i) AddNode(MakeNode("n" + std::to_string(i), 4, 80 * kGiB));
  TaskSpec gang = WholeGpuTask(4);
  gang.nodes = 2;
  const TaskId g = Submit(gang);
  const PassPlan plan = PlanUnchanged();
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].task, g);
  EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kAssign);
  ASSERT_EQ(plan.steps[0].gang.size(), 1u);
  EXPECT_NE(plan.steps[0].placement.node, plan.steps[0].gang[0].node);
  EXPECT_EQ(T(g).state, TaskState::kPending);
  EXPECT_TRUE(T(g).gang_placements.empty());
}

TEST_F(PassPlannerTest, Issue40_PlansAPreemptionWithoutStoppingTheVictim) {
  AddNode(MakeNode("n0", 4, 80 * kGiB));
  std::vector<TaskId> low;
  for (int gpus : {1, 1, 2}) {
    TaskSpec t = WholeGpuTask(gpus);
    t.priority_class = "low";
    t.preemptible = true;
    low.push_back(Submit(t));
  }
  sched_->Schedule();
  StartAssigned();
  TaskSpec high = WholeGpuTask(2);
  high.priority_class = "high";
  const TaskId h = Submit(high);
  const PassPlan plan = PlanUnchanged();
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kPreempt);
  EXPECT_EQ(plan.steps[0].task, h);
  EXPECT_EQ(plan.steps[0].victims, std::vector<TaskId>{low[2]});  // one victim, not two
  EXPECT_EQ(T(low[2]).state, TaskState::kRunning);
  EXPECT_EQ(sched_->stats().priority_preemptions, 0);
  sched_->Schedule();
  EXPECT_EQ(T(low[2]).state, TaskState::kPreempted);
  EXPECT_EQ(T(h).placement->node, plan.steps[0].placement.node);
}

}  // namespace
}  // namespace gpusched::core
