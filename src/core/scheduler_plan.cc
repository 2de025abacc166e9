// Scheduler: the dispatch pass, planned by PassPlanner (core/pass_planner.h, pure) and applied
// here (Mesos keeps its sorter apart from its allocator the same way): CommitPlan reserves,
// changes states, queues and counters, and emits actions.

#include <algorithm>

#include "core/explain_need.h"
#include "core/pass_planner.h"
#include "core/scheduler.h"

namespace gpusched::core {

PassPlan Scheduler::PlanPass() const { return PassPlanner(*this).Plan(); }

std::vector<QueueKey> Scheduler::PassSnapshot(bool release_pass) const {
  std::vector<QueueKey> snapshot = main_queue_.Snapshot();
  if (!release_pass || fq_capacity_.empty()) return snapshot;
  const auto q = static_cast<std::ptrdiff_t>(snapshot.size());
  snapshot.reserve(snapshot.size() + fq_capacity_.size());
  for (TaskId id : fq_capacity_) snapshot.push_back(KeyOf(tasks_.At(id)));
  std::sort(snapshot.begin() + q, snapshot.end());
  std::inplace_merge(snapshot.begin(), snapshot.begin() + q, snapshot.end());
  return snapshot;
}


void Scheduler::AwaitNodes(std::set<std::string> nodes, TimeMs until_ms) {
  awaited_nodes_ = std::move(nodes);
  await_until_ms_ = until_ms;
}

bool Scheduler::AwaitingNodes(TimeMs now) {
  if (awaited_nodes_.empty()) return false;
  if (now >= await_until_ms_) {
    awaited_nodes_.clear();
    return false;
  }
  std::erase_if(awaited_nodes_, [&](const std::string& name) {
    const std::optional<size_t> i = cluster().Find(name);
    return !i || cluster().node(*i).reachable;
  });
  return !awaited_nodes_.empty();
}

size_t Scheduler::Schedule() {
  pass_requested_ = false;
  const TimeMs now = clock_.NowMs();
  next_pass_ms_ = now + config_.t1_ms;
  // No node is reachable: none has registered yet, or none has reconnected since a restore.
  // A pass would fail every task for want of a node and park it in FQ for t2 (claim 3),
  // although the registration that ends the wait asks for a pass at once. Nothing can be
  // decided, so nothing is: the tasks keep their place in Q (PATENTS.md section 6).
  if (cluster().reachable_count() == 0) return 0;
  if (AwaitingNodes(now)) {
    next_pass_ms_ = std::min(next_pass_ms_, await_until_ms_);  // the wait's end is due a pass
    return 0;
  }
  ++stats_.passes;
  if (FairShareActive() && fair_share_.RecalcDue(now)) RecalcFairShare();
  return CommitPlan(PlanPass());
}

size_t Scheduler::CommitPlan(PassPlan plan) {
  const int64_t placed_before = stats_.placed;
  stats_.decisions += plan.decisions;
  stats_.memo_hits += plan.memo_hits;
  stats_.parallel_decisions += plan.parallel_decisions;
  stats_.parked_waits += plan.parked_waits;
  for (const std::string& team : plan.teams_classified) ledger_.Touch(team);
  // The reservation is set before the steps: a step that places its holder clears it.
  reservation_ = std::move(plan.reservation);
  // The steps were decided on the plan's view: none asks the table for an answer, so the
  // node index catches up once per changed node, after the last step.
  const ClusterState::IndexHold hold = resources_.HoldIndex();
  for (PlanStep& step : plan.steps) {
    Task& t = *Find(step.task);
    switch (step.kind) {
      case PlanStep::Kind::kReclaim:
        StopForReclaim(t, step.victims);
        [[fallthrough]];
      case PlanStep::Kind::kPreempt:
        StopForPriority(t, step.victims);
        [[fallthrough]];
      case PlanStep::Kind::kAssign:
        ApplyAssign(t, step);
        break;
      case PlanStep::Kind::kWait:
        if (t.queue == QueueMembership::kFailure) {  // a release pass re-evaluated it
          RefreshWait(t, step.report, step.reason, clock_.NowMs());
          break;
        }
        OnCapacityWait(t, std::move(step.report), step.reason);
        if (plan.flush_pass) MaybePark(t);
        break;
      case PlanStep::Kind::kParkedWait:
        ApplyParkedWait(step);
        break;
      case PlanStep::Kind::kQuotaWait:
        QuotaWait(t, step.reason);
        break;
    }
  }
  const TimeMs now_ms = clock_.NowMs();
  for (const PassPlan::Refresh& r : plan.refreshes) {
    const PassPlan::WaitVerdict& v = plan.verdicts[r.verdict];
    RefreshWait(*Find(r.task), v.report, v.reason, now_ms);
  }
  if (plan.release_pass) capacity_event_ = false;
  if (plan.flush_pass) {
    ++flush_rounds_;
    flush_pass_due_ = false;
    flush_block_end_ = failure_queue_.next_position();
  }
  return static_cast<size_t>(stats_.placed - placed_before);
}

void Scheduler::StopForReclaim(const Task& t, const std::vector<TaskId>& victims) {
  const std::string reason = "preempted: team " + TeamOf(t.spec) + " reclaims its guaranteed GPUs";
  for (TaskId id : victims) {
    Task& v = *Find(id);
    if (!IsActive(v)) continue;
    // The grace of a priority preemption (issue 37: the "ready in" of `why`).
    PushKill(v, reason, v.spec.grace_ms.value_or(config_.preemption_grace_ms));
    ++v.preemptions;
    ++stats_.preemptions;
    ++stats_.reclaims;
    Requeue(v, reason);  // not a failure: fail_cnt unchanged, attained service kept
  }
}

void Scheduler::StopForPriority(const Task& t, const std::vector<TaskId>& victims) {
  const std::string reason = "preempted by task " + t.id.ToString() + " (priority " +
                             std::to_string(t.priority) + ")";
  for (TaskId id : victims) {
    Task& v = *Find(id);
    if (!IsActive(v)) continue;
    const DurationMs grace = v.spec.grace_ms.value_or(config_.preemption_grace_ms);
    PushKill(v, reason, grace);
    ++v.preemptions;
    ++stats_.preemptions;
    ++stats_.priority_preemptions;
    v.preempted_by = t.id;
    v.preempted_attempt = v.attempts;
    // Not a failure: back to Q in state preempted, attained service kept.
    Requeue(v, reason, TaskState::kPreempted);
    preemption_log_.push_back({clock_.NowMs(), t.id, id, grace});
    if (preemption_log_.size() > kMaxPreemptionLog) preemption_log_.pop_front();
  }
}

void Scheduler::ApplyAssign(Task& t, PlanStep& step) {
  t.last_report = std::move(step.report);
  t.last_report_summary = DescribeReport(t.last_report);
  t.report_pass = stats_.passes;
  t.report_ms = clock_.NowMs();
  if (!step.reason.empty()) {  // kReclaim: the quota state and what it reclaims
    t.last_report_summary = step.reason + "; " + t.last_report_summary;
  }
  Commit(t, step.placement, std::move(step.gang));
}

}  // namespace gpusched::core
