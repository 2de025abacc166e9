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
  for (const PassPlan::Refresh& r : plan.refreshes) {
    const PassPlan::WaitVerdict& v = plan.verdicts.at(r.verdict);
    out += "refresh " + r.task.ToString() + " " + v.reason + " | " + DescribeReport(v.report) +
           "\n";
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

// Issue 43: the FQ tasks a release pass re-evaluates and the failed-shape memo answers keep
// waiting through a (task, verdict) pair each, not a PlanStep with its own report. The
// records they end with are the ones a pass that answers every task by a scan writes: the
// same reason (the reservation's words for a task with a time limit and for one without),
// report and report pass. Run twice, memo on and off, on the same events.
class ReleasePassRefreshTest : public PassPlannerTest {
 protected:
  // Two nodes of 2 GPUs, each GPU busy with a task of 1 h; a 2-GPU task that reserves; six
  // one-GPU tasks that wait in FQ, every other one with a time limit of 2 h.
  void Fill(bool memo) {
    SchedulerConfig config;
    config.memoize_failed_shapes = memo;
    Init(config);
    running_.clear();
    waiting_.clear();
    AddNode(MakeNode("a", 2, 16 * kGiB));
    AddNode(MakeNode("b", 2, 16 * kGiB));
    for (int i = 0; i < 4; ++i) {
      TaskSpec busy = WholeGpuTask(1, "busy" + std::to_string(i));
      busy.time_limit_ms = 3600 * testing::kS;
      running_.push_back(Submit(busy));
    }
    sched_->Schedule();
    StartAssigned();
    wide_ = Submit(WholeGpuTask(2, "wide"));
    for (int i = 0; i < 6; ++i) {
      TaskSpec one = WholeGpuTask(1, "one" + std::to_string(i));
      if (i % 2 == 1) one.time_limit_ms = 7200 * testing::kS;
      waiting_.push_back(Submit(one));
    }
    sched_->Schedule();
    ASSERT_EQ(sched_->FailureQueueOrder().size(), 7u);
    ASSERT_TRUE(sched_->reservation().has_value());
  }
  // What each waiting task's record says.
  std::string Records() {
    std::string out;
    for (TaskId id : waiting_) {
      const Task& t = T(id);
      out += id.ToString() + " " + TaskStateName(t.state) + " " + t.reason + " | " +
             t.last_report_summary + " | " + DescribeReport(t.last_report) + " | pass " +
             std::to_string(t.report_pass) + " pf " + std::to_string(t.placement_failures) +
             "\n";
    }
    return out;
  }
  std::vector<TaskId> running_, waiting_;
  TaskId wide_;
};

TEST_F(ReleasePassRefreshTest,
       Issue43_CN115981827A_Claim3_ReleasePassRefreshesFqWaitersAsTheScanWould) {
  Fill(/*memo=*/false);
  ASSERT_TRUE(sched_->TaskFinished(running_[0], T(running_[0]).attempts, 0, 0).ok());
  const PassPlan scanned = PlanUnchanged();
  EXPECT_TRUE(scanned.release_pass);
  EXPECT_TRUE(scanned.refreshes.empty()) << "no memo, no refresh: a step each";
  sched_->Schedule();
  const std::string by_scan = Records();
  const std::string by_scan_state = StateOf(*sched_);

  Fill(/*memo=*/true);
  ASSERT_TRUE(sched_->TaskFinished(running_[0], T(running_[0]).attempts, 0, 0).ok());
  const PassPlan plan = PlanUnchanged();
  EXPECT_EQ(plan.decisions, scanned.decisions);
  // The holder is tried first and the first one-GPU task is scanned; the five others are
  // refreshes of two verdicts, one for each thing the reservation says of a task (it has no
  // time limit; its time limit is too long).
  ASSERT_EQ(plan.refreshes.size(), 5u) << Render(plan);
  EXPECT_EQ(plan.verdicts.size(), 2u) << Render(plan);
  EXPECT_LT(plan.steps.size(), scanned.steps.size());
  sched_->Schedule();
  EXPECT_EQ(Records(), by_scan);
  EXPECT_EQ(StateOf(*sched_), by_scan_state);
  EXPECT_NE(by_scan.find("no time limit to backfill by"), std::string::npos) << by_scan;
  EXPECT_NE(by_scan.find("would not end before the reservation starts"), std::string::npos)
      << by_scan;
  EXPECT_TRUE(sched_->CheckInvariants().ok());
}

}  // namespace
}  // namespace gpusched::core
