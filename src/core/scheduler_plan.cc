// Scheduler: the dispatch pass, as a pure planner and the mechanism that applies its plan
// (Mesos keeps its sorter apart from its allocator the same way). PlanPass walks a snapshot of
// Q in order (CN115981827A claim 2), builds each task's ResourceRequest (task management,
// CN109992422A claim 10) and asks the ResourceManager for an answer over the plan's view of
// the state table; CommitPlan reserves, changes states, queues and counters, and emits actions.

#include <algorithm>

#include "core/explain_need.h"
#include "core/scheduler.h"

namespace gpusched::core {

// A pass being planned. The state table is copied on the first reservation the plan makes
// (a pass that places nothing copies nothing); team usage is copied only under quotas.
struct Scheduler::Planning {
  explicit Planning(const ClusterState& table) : base(table) {}
  const ClusterState& View() const { return copy ? *copy : base; }
  ClusterState& Mutable() {
    if (!copy) copy.emplace(base);
    return *copy;
  }

  const ClusterState& base;
  std::optional<ClusterState> copy;
  std::map<std::string, TeamUsage> usage;  // under quotas: team_usage_ plus the plan's changes
  // Within one pass capacity only shrinks (until a reclaim frees some, which clears this), so
  // a request shape that found no node cannot find one later in the same pass: remember it
  // and skip the scan (same result, same report).
  std::map<Shape, std::pair<PlacementReport, std::string>> failed_shapes;  // report, reason
  std::map<TaskId, Placement> assigned;  // by this plan, kept only when a reclaim may stop them
  std::set<TaskId> stopped;              // by this plan's reclaims
  PassPlan plan;
};

namespace {

void AddUsage(TeamUsage& u, const Placement& p, int sign) {
  MiB mem = 0;
  for (MiB m : p.gpu_mem_mib) mem += m;
  u.gpus += sign * static_cast<int64_t>(p.gpus.size());
  u.gpu_mem_mib += sign * mem;
  u.tasks += sign;
}

}  // namespace

PassPlan Scheduler::PlanPass() const {
  Planning p(resources_.state());
  // CN115981827A claim 2: one snapshot of Q in (Pt, first-submission) order (or the fair-share
  // order, core/fair_share.h); a task that fails is not retried in the same pass.
  const std::vector<QueueKey> snapshot = main_queue_.Snapshot();
  p.plan.steps.reserve(snapshot.size());
  if (quotas_.empty()) {
    p.plan.flush_pass = flush_pass_due_;
    if (flush_pass_due_ && !parked_.empty()) {
      PlanWithParked(snapshot, p);
      return std::move(p.plan);
    }
    // No quota anywhere: every team borrows idle capacity alike, one walk in queue order.
    for (const QueueKey& key : snapshot) {
      if (!PlanPlace(*GetTask(key.id), p, false) && config_.head_of_line_blocking) break;
    }
    return std::move(p.plan);
  }
  // Team quotas (core/quota.h): first every task its team's guarantee covers, in queue order
  // (each may reclaim borrowed GPUs); then, on what is left idle, the tasks that borrow.
  p.usage = team_usage_;
  std::vector<const Task*> borrowers;
  for (const QueueKey& key : snapshot) {
    const Task& t = *GetTask(key.id);
    const std::string team = TeamOf(t.spec);
    p.plan.teams_classified.insert(team);
    if (quotas_.Classify(team, p.usage[team], t.spec.gpus, TaskGpuMemMib(t)) !=
        QuotaClass::kWithinGuarantee) {
      borrowers.push_back(&t);
      continue;
    }
    if (!PlanPlace(t, p, config_.reclaim_borrowed) && config_.head_of_line_blocking) {
      return std::move(p.plan);
    }
  }
  for (const Task* t : borrowers) {
    const std::string team = TeamOf(t->spec);
    const TeamUsage& used = p.usage[team];
    if (quotas_.Classify(team, used, t->spec.gpus, TaskGpuMemMib(*t)) == QuotaClass::kOverLimit) {
      PlanStep step;
      step.kind = PlanStep::Kind::kQuotaWait;
      step.task = t->id;
      step.reason = quotas_.DescribeLimit(team, used);
      p.plan.steps.push_back(std::move(step));
      continue;
    }
    if (!PlanPlace(*t, p, false) && config_.head_of_line_blocking) break;
  }
  return std::move(p.plan);
}

bool Scheduler::PlanPlace(const Task& t, Planning& p, bool reclaim) const {
  const ResourceRequest req = MakeRequest(t);
  const PlacementRequest& r = req.shape;
  const bool plain = config_.memoize_failed_shapes && t.spec.node_selector.empty() &&
                     t.spec.tolerations.empty();
  const Shape shape = ShapeOf(req);
  ++p.plan.decisions;
  PlanStep step;
  step.task = t.id;
  if (plain && !reclaim) {
    if (auto it = p.failed_shapes.find(shape); it != p.failed_shapes.end()) {
      ++p.plan.memo_hits;
      step.kind = PlanStep::Kind::kWait;
      step.report = it->second.first;
      step.reason = it->second.second;
      p.plan.steps.push_back(std::move(step));
      return false;
    }
  }
  PlacementResult result = resources_.AnswerOn(p.View(), req);
  if (result.report.chunks_used > 1) ++p.plan.parallel_decisions;
  switch (result.outcome) {
    case PlaceOutcome::kPlaced:
      p.Mutable().Reserve(result.placement);  // the next decision of the plan sees it
      if (!quotas_.empty()) {
        AddUsage(p.usage[TeamOf(t.spec)], result.placement, +1);
        if (config_.reclaim_borrowed) p.assigned[t.id] = result.placement;
      }
      step.kind = PlanStep::Kind::kAssign;
      step.placement = std::move(result.placement);
      step.report = std::move(result.report);
      p.plan.steps.push_back(std::move(step));
      return true;
    case PlaceOutcome::kRetryLater:
    case PlaceOutcome::kInfeasible:
      break;  // both wait (capacity_wait); the reason says which
  }
  if (reclaim && PlanReclaim(t, req, p)) {
    p.failed_shapes.clear();  // capacity grew: earlier failures may fit now
    return true;
  }
  std::string reason = std::move(result.reason);
  const FilterCounts& rejected = result.report.rejected;
  if (rejected[kFilterNodeSelector] > 0 || rejected[kFilterTaintToleration] > 0) {
    // Say which rule leaves no node, in the words of the task's own flags.
    if (std::string rules = DescribeRules(p.View(), r); !rules.empty()) reason += "; " + rules;
  }
  step.kind = PlanStep::Kind::kWait;
  step.report = result.report;
  step.reason = reason;
  p.plan.steps.push_back(std::move(step));
  if (plain) {
    p.failed_shapes.emplace(shape, std::pair(std::move(result.report), std::move(reason)));
  }
  return false;
}

void Scheduler::PlanWithParked(const std::vector<QueueKey>& snapshot, Planning& p) const {
  struct Cursor {
    const Shape* shape;
    const ParkedQueue::Group* group;
    std::set<QueueKey>::const_iterator next;  // the group's first task this pass has not placed
    int64_t placed = 0;
  };
  std::vector<Cursor> groups;
  for (const auto& [shape, g] : parked_.groups()) groups.push_back({&shape, &g, g.keys.begin()});
  size_t q = 0;
  for (;;) {
    // The smallest key of all: the next task of the Q snapshot or a group's next task.
    Cursor* first = nullptr;
    for (Cursor& c : groups) {
      if (c.next != c.group->keys.end() && (first == nullptr || *c.next < *first->next)) {
        first = &c;
      }
    }
    if (q < snapshot.size() && (first == nullptr || snapshot[q] < *first->next)) {
      PlanPlace(*GetTask(snapshot[q++].id), p, false);
      continue;
    }
    if (first == nullptr) return;
    const TaskId head = first->next->id;
    bool visited = false;
    if (p.failed_shapes.count(*first->shape) == 0) {
      if (PlanPlace(*GetTask(head), p, false)) {
        ++first->next;
        ++first->placed;
        continue;
      }
      visited = true;
      p.plan.steps.pop_back();  // its kWait: it waits with its group, below
      --p.plan.decisions;
    }
    // The shape found no node in this pass: each of the group's remaining tasks would fail on
    // the memo, so they all wait now, with the memo's report, unvisited.
    const auto& [report, reason] = p.failed_shapes.at(*first->shape);
    const int64_t waiting = static_cast<int64_t>(first->group->keys.size()) - first->placed;
    p.plan.decisions += waiting;
    p.plan.parked_waits += waiting - (visited ? 1 : 0);
    PlanStep step;
    step.kind = PlanStep::Kind::kParkedWait;
    step.task = head;
    step.report = report;
    step.reason = reason;
    p.plan.steps.push_back(std::move(step));
    first->next = first->group->keys.end();
  }
}

// Victims: the tasks of teams that borrow (hold more than their guarantee), newest first
// (latest assignment, ties by the larger id), taken while their team still borrows, until the
// reclaimer fits on the cluster without them. Kueue's reclaimWithinCohort, minus priorities.
// Tasks this plan assigned count as assigned now.
bool Scheduler::PlanReclaim(const Task& t, const ResourceRequest& req, Planning& p) const {
  struct Candidate {
    TaskId id;
    TimeMs assigned_ms;
    std::string team;
    const Placement* placement;
  };
  const std::string team = TeamOf(t.spec);
  std::vector<Candidate> candidates;
  auto consider = [&](const Task& v, TimeMs assigned_ms, const Placement& placement) {
    const std::string vt = TeamOf(v.spec);
    if (vt == team || v.spec.gpus == 0) return;
    if (quotas_.IsBorrowing(vt, p.usage[vt])) {
      candidates.push_back({v.id, assigned_ms, vt, &placement});
    }
  };
  for (TaskId id : active_) {
    if (p.stopped.count(id) > 0) continue;
    const Task& v = *GetTask(id);
    consider(v, v.assigned_ms, *v.placement);
  }
  for (const auto& [id, placement] : p.assigned) consider(*GetTask(id), clock_.NowMs(), placement);
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.assigned_ms != b.assigned_ms) return a.assigned_ms > b.assigned_ms;
    return a.id > b.id;
  });
  ClusterState trial = p.View();
  std::map<std::string, TeamUsage> used = p.usage;
  std::vector<const Candidate*> victims;
  bool fits = false;
  for (const Candidate& v : candidates) {
    if (!quotas_.IsBorrowing(v.team, used[v.team])) continue;  // no longer borrows: keep the rest
    trial.Release(*v.placement);
    TeamUsage& u = used[v.team];
    u.gpus -= static_cast<int64_t>(v.placement->gpus.size());
    for (MiB m : v.placement->gpu_mem_mib) u.gpu_mem_mib -= m;
    victims.push_back(&v);
    if (resources_.AnswerOn(trial, req).placed()) {
      fits = true;
      break;
    }
  }
  if (!fits) return false;
  PlanStep step;
  step.kind = PlanStep::Kind::kReclaim;
  step.task = t.id;
  for (const Candidate* v : victims) {
    p.Mutable().Release(*v->placement);
    AddUsage(p.usage[v->team], *v->placement, -1);
    step.victims.push_back(v->id);
  }
  // Copied placements of this plan's own victims die with `assigned`: erase after use.
  for (TaskId id : step.victims) {
    p.stopped.insert(id);
    p.assigned.erase(id);
  }
  PlacementResult result = resources_.AnswerOn(p.View(), req);
  if (!result.placed()) return false;  // cannot happen: the same state as the trial
  p.Mutable().Reserve(result.placement);
  AddUsage(p.usage[team], result.placement, +1);
  p.assigned[t.id] = result.placement;
  step.placement = std::move(result.placement);
  step.report = std::move(result.report);
  p.plan.steps.push_back(std::move(step));
  return true;
}

size_t Scheduler::Schedule() {
  ++stats_.passes;
  pass_requested_ = false;
  const TimeMs now = clock_.NowMs();
  next_pass_ms_ = now + config_.t1_ms;
  if (FairShareActive() && (fs_dirty_ || now >= next_fs_recalc_ms_)) RecalcFairShare();
  return CommitPlan(PlanPass());
}

size_t Scheduler::CommitPlan(PassPlan plan) {
  const int64_t placed_before = stats_.placed;
  stats_.decisions += plan.decisions;
  stats_.memo_hits += plan.memo_hits;
  stats_.parallel_decisions += plan.parallel_decisions;
  stats_.parked_waits += plan.parked_waits;
  for (const std::string& team : plan.teams_classified) team_usage_.try_emplace(team);
  for (PlanStep& step : plan.steps) {
    Task& t = *Find(step.task);
    switch (step.kind) {
      case PlanStep::Kind::kReclaim: {
        const std::string reason =
            "preempted: team " + TeamOf(t.spec) + " reclaims its guaranteed GPUs";
        for (TaskId id : step.victims) {
          if (Preempt(id, reason).ok()) ++stats_.reclaims;
        }
        [[fallthrough]];
      }
      case PlanStep::Kind::kAssign:
        t.last_report = std::move(step.report);
        t.last_report_summary = DescribeReport(t.last_report);
        Commit(t, step.placement);
        break;
      case PlanStep::Kind::kWait:
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
  if (plan.flush_pass) {
    ++flush_rounds_;
    flush_pass_due_ = false;
    flush_block_end_ = failure_queue_.next_position();
  }
  return static_cast<size_t>(stats_.placed - placed_before);
}

}  // namespace gpusched::core
