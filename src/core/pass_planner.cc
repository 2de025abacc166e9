// PassPlanner: the dispatch pass as a pure planner (issue 40; Scheduler::CommitPlan applies
// the plan, as Mesos keeps its sorter apart from its allocator). Plan walks a snapshot of Q in
// order (CN115981827A claim 2), builds each task's ResourceRequest (task management,
// CN109992422A claim 10) and asks the ResourceManager for an answer over the plan's view of
// the state table.

#include "core/pass_planner.h"

#include <algorithm>

#include "core/explain_need.h"
#include "core/reclaim.h"

namespace gpusched::core {

// A pass being planned. The state table is copied on the first reservation the plan makes
// (a pass that places nothing copies nothing); team usage is copied only under quotas.
struct PassPlanner::Planning {
  // `view_buffer` and `blocked_buffer` hold the plan's copies; assigning into them reuses
  // their memory from the previous pass (a fresh copy of the table per pass, one malloc per
  // string, vector and label, was a quarter of a long replay's time).
  Planning(const ClusterState& table, ClusterState& view_buffer, ClusterState& blocked_buffer)
      : base(table), view_buffer(view_buffer), blocked_buffer(blocked_buffer) {}
  const ClusterState& View() const { return copy != nullptr ? *copy : base; }
  ClusterState& Mutable() {
    if (copy == nullptr) {
      view_buffer = base;
      copy = &view_buffer;
    }
    return *copy;
  }
  // Every change of the plan's view goes to the blocked view too.
  void Reserve(const Placement& pl) {
    Mutable().Reserve(pl);
    if (blocked) blocked->Reserve(pl);
  }
  void Release(const Placement& pl) {
    Mutable().Release(pl);
    if (blocked) blocked->Release(pl);
  }
  void SetReservation(std::optional<Reservation> r) {
    plan.reservation = std::move(r);
    blocked = nullptr;
    failed_shapes_blocked.clear();
    failed_gangs.clear();
  }
  void CapacityGrew() {
    failed_shapes.clear();
    failed_shapes_blocked.clear();
    failed_gangs.clear();
  }
  // The same views, to try a gang on (PlaceGangOn leaves them as it found them).
  ClusterState& MutableBlocked() {
    if (!plan.reservation) return Mutable();
    Blocked();
    return *blocked;
  }
  // The view of a task that may not use the reserved GPUs: they take no task in it.
  const ClusterState& Blocked() {
    if (!plan.reservation) return View();
    if (blocked == nullptr) {
      blocked_buffer = View();
      blocked = &blocked_buffer;
      BlockReserved(*blocked, *plan.reservation);
    }
    return *blocked;
  }

  const ClusterState& base;
  ClusterState& view_buffer;
  ClusterState& blocked_buffer;
  ClusterState* copy = nullptr;  // the view once the plan changed it (in view_buffer)
  std::map<std::string, TeamUsage> usage;  // under quotas: the ledger's usage plus the plan's
  // Within one pass capacity only shrinks (until a reclaim frees some, which clears this), so
  // a request shape that found no node cannot find one later in the same pass: remember it
  // and skip the scan (same result, same report).
  FailedShapes failed_shapes;
  // The same memo for the tasks that were answered on the blocked view.
  FailedShapes failed_shapes_blocked;
  ClusterState* blocked = nullptr;  // in blocked_buffer
  // Gangs that found too few nodes in this pass: (per-node shape, nodes, blocked view).
  std::map<std::tuple<Shape, int64_t, bool>, std::pair<PlacementReport, std::string>>
      failed_gangs;
  std::map<TaskId, Placement> assigned;  // by this plan, kept only when a reclaim may stop them
  std::set<TaskId> stopped;              // by this plan's reclaims
  TaskId tried_first;  // the reservation holder, tried before the walk (PlanHolderFirst)
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

// The shape of a parked group found no node in this pass: each of the group's `waiting` tasks
// (its head among them, `visited` or not) would fail on the memo, so they all wait now, with
// the memo's report, unvisited.
void WaitParkedGroup(PassPlan& plan, TaskId head, int64_t waiting, bool visited,
                     PlacementReport report, std::string reason) {
  plan.decisions += waiting;
  plan.parked_waits += waiting - (visited ? 1 : 0);
  PlanStep step;
  step.kind = PlanStep::Kind::kParkedWait;
  step.task = head;
  step.report = std::move(report);
  step.reason = std::move(reason);
  plan.steps.push_back(std::move(step));
}

// Takes back the wait PlanPlace just planned for `head`, with its report and reason: a kWait
// step, or a refresh when `head` waits in FQ and the memo answered its request's shape (one
// that changed since it was parked).
void TakeBackWait(PassPlan& plan, TaskId head, PlacementReport& report, std::string& reason) {
  if (!plan.refreshes.empty() && plan.refreshes.back().task == head) {
    const PassPlan::WaitVerdict& v = plan.verdicts[plan.refreshes.back().verdict];
    report = v.report;
    reason = v.reason;
    plan.refreshes.pop_back();
  } else {
    report = std::move(plan.steps.back().report);
    reason = std::move(plan.steps.back().reason);
    plan.steps.pop_back();
  }
  --plan.decisions;
}

}  // namespace

PassPlanner::PassPlanner(const Scheduler& scheduler)
    : scheduler_(scheduler),
      config_(scheduler.config_),
      clock_(scheduler.clock_),
      resources_(scheduler.resources_),
      tasks_(scheduler.tasks_),
      ledger_(scheduler.ledger_),
      parked_(scheduler.parked_),
      reservation_(scheduler.reservation_),
      flush_pass_due_(scheduler.flush_pass_due_),
      capacity_event_(scheduler.capacity_event_),
      fq_capacity_(scheduler.fq_capacity_),
      plan_view_buffer_(scheduler.plan_view_buffer_),
      plan_blocked_buffer_(scheduler.plan_blocked_buffer_) {}

PassPlan PassPlanner::Plan() const {
  Planning p(resources_.state(), plan_view_buffer_, plan_blocked_buffer_);
  if (reservation_) {
    const Task* holder = GetTask(reservation_->task);
    if (holder != nullptr && IsPending(holder->state)) p.plan.reservation = reservation_;
  }
  PlanHolderFirst(p);
  if (p.plan.reservation && p.tried_first == p.plan.reservation->task &&
      config_.head_of_line_blocking) {
    return std::move(p.plan);  // the head did not fit
  }
  // CN115981827A claim 2: one snapshot of Q in (Pt, first-submission) order (or the fair-share
  // order, core/fair_share.h); a task that fails is not retried in the same pass. A pass that
  // a release triggered also re-evaluates the tasks waiting in FQ for capacity (issue 37).
  p.plan.release_pass = capacity_event_;
  std::vector<QueueKey> snapshot = PassSnapshot(p.plan.release_pass);
  // The holder, already tried before the walk, is not tried twice (a release pass adds FQ's
  // capacity waiters, the holder among them): two assignments of one task.
  if (p.tried_first.valid()) {
    std::erase_if(snapshot, [&](const QueueKey& k) { return k.id == p.tried_first; });
  }
  // A step for every task of Q; FQ's capacity waiters that the memo answers take none.
  const size_t fq = p.plan.release_pass ? fq_capacity_.size() : 0;
  p.plan.steps.reserve(snapshot.size() > fq ? snapshot.size() - fq : 0);
  if (ledger_.quotas().empty()) {
    p.plan.flush_pass = flush_pass_due_;
    if ((flush_pass_due_ || p.plan.release_pass) && !parked_.empty()) {
      PlanWithParked(snapshot, p);
      return std::move(p.plan);
    }
    // No quota anywhere: every team borrows idle capacity alike, one walk in queue order.
    for (const QueueKey& key : snapshot) {
      if (!PlanPlace(*GetTask(key.id), p, false) && config_.head_of_line_blocking) break;
    }
    return std::move(p.plan);
  }
  PlanWithQuotas(snapshot, p);
  return std::move(p.plan);
}

// Team quotas (core/quota.h): first every task its team's guarantee covers, in queue order
// (each may reclaim borrowed GPUs); then, on what is left idle, the tasks that borrow.
void PassPlanner::PlanWithQuotas(const std::vector<QueueKey>& snapshot, Planning& p) const {
  p.usage = ledger_.usage();
  std::vector<const Task*> borrowers;
  for (const QueueKey& key : snapshot) {
    const Task& t = *GetTask(key.id);
    const std::string team = TeamOf(t.spec);
    p.plan.teams_classified.insert(team);
    if (ledger_.quotas().Classify(team, p.usage[team], TotalGpus(t.spec), TaskGpuMemMib(t)) !=
        QuotaClass::kWithinGuarantee) {
      borrowers.push_back(&t);
      continue;
    }
    if (!PlanPlace(t, p, config_.reclaim_borrowed) && config_.head_of_line_blocking) return;
  }
  for (const Task* t : borrowers) {
    const std::string team = TeamOf(t->spec);
    const TeamUsage& used = p.usage[team];
    if (ledger_.quotas().Classify(team, used, TotalGpus(t->spec), TaskGpuMemMib(*t)) ==
        QuotaClass::kOverLimit) {
      PlanStep step;
      step.kind = PlanStep::Kind::kQuotaWait;
      step.task = t->id;
      step.reason = ledger_.quotas().DescribeLimit(team, used);
      p.plan.steps.push_back(std::move(step));
      continue;
    }
    if (!PlanPlace(*t, p, false) && config_.head_of_line_blocking) break;
  }
}

bool PassPlanner::PlanPlace(const Task& t, Planning& p, bool reclaim) const {
  if (t.spec.nodes > 1) return PlanGang(t, p);
  const ResourceRequest req = MakeRequest(t);
  // A task that could preempt lower priorities is never answered from the memo.
  const bool may_preempt = MayPreemptByPriority(t);
  const bool plain = config_.memoize_failed_shapes && t.spec.node_selector.empty() &&
                     t.spec.tolerations.empty() && !may_preempt;
  const Shape shape = ShapeOf(req);
  const bool blocked = !CanBackfill(t, p);
  const bool holder = p.plan.reservation && p.plan.reservation->task == t.id;
  auto& memo = blocked ? p.failed_shapes_blocked : p.failed_shapes;
  ++p.plan.decisions;
  // A task that would reserve is answered anew: the memo knows nothing of reservations.
  if (plain && !reclaim && !WouldReserve(t, p)) {
    if (auto it = memo.find(shape); it != memo.end()) {
      ++p.plan.memo_hits;
      if (t.queue == QueueMembership::kFailure) {  // a release pass re-evaluated it in FQ
        p.plan.refreshes.push_back({t.id, VerdictOf(it->second, t, blocked, p)});
        return false;
      }
      PlanStep step;
      step.task = t.id;
      step.kind = PlanStep::Kind::kWait;
      step.report = it->second.report;
      step.reason = it->second.reason;
      if (blocked) step.reason += DescribeBlocked(*p.plan.reservation, t.spec, p.View());
      p.plan.steps.push_back(std::move(step));
      return false;
    }
  }
  PlanStep step;
  step.task = t.id;
  PlacementResult result = resources_.AnswerOn(blocked ? p.Blocked() : p.View(), req);
  if (result.report.chunks_used > 1) ++p.plan.parallel_decisions;
  switch (result.outcome) {
    case PlaceOutcome::kPlaced:
      if (holder) p.SetReservation(std::nullopt);  // its GPUs are its own now
      p.Reserve(result.placement);  // the next decision of the plan sees it
      if (!ledger_.quotas().empty()) {
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
  if ((reclaim && PlanReclaim(t, req, p)) || (may_preempt && PlanPreempt(t, req, p))) {
    if (holder) p.SetReservation(std::nullopt);
    p.CapacityGrew();  // earlier failures may fit now
    return true;
  }
  PlanWait(t, req, std::move(result), plain ? &memo : nullptr, blocked, reclaim, p);
  return false;
}

void PassPlanner::PlanWait(const Task& t, const ResourceRequest& req, PlacementResult result,
                         FailedShapes* memo, bool blocked, bool reclaim, Planning& p) const {
  PlanStep step;
  step.task = t.id;
  std::string reason = std::move(result.reason);
  const FilterCounts& rejected = result.report.rejected;
  if (rejected[kFilterNodeSelector] > 0 || rejected[kFilterTaintToleration] > 0) {
    // Say which rule leaves no node, in the words of the task's own flags.
    if (std::string rules = DescribeRules(p.View(), req.shape); !rules.empty()) {
      reason += "; " + rules;
    }
  }
  // The memo keeps the words every task of the shape shares; what the reservation means for
  // this task (its time limit) and the holder's own words follow.
  if (memo != nullptr) memo->emplace(ShapeOf(req), FailedShape{result.report, reason});
  if (blocked) reason += DescribeBlocked(*p.plan.reservation, t.spec, p.View());
  if (IsWide(t.spec)) PlanHold(t, req, p, reason);
  step.kind = PlanStep::Kind::kWait;
  step.report = std::move(result.report);  // `rejected` is not read again
  step.reason = std::move(reason);
  if (reclaim) {  // the quota state, for this task only (the memo is shared by every team)
    const std::string team = TeamOf(t.spec);
    step.reason += "; " + DescribeQuotaState(team, p.usage[team], ledger_.quotas().Of(team)) +
                   ", nothing to reclaim: no team above its guarantee holds GPUs that free a "
                   "node it can use";
  }
  p.plan.steps.push_back(std::move(step));
}

uint32_t PassPlanner::VerdictOf(FailedShape& failed, const Task& t, bool blocked,
                                Planning& p) const {
  // What DescribeBlocked adds depends on the task only through whether it has a time limit.
  int32_t& index = failed.verdicts[blocked && t.spec.time_limit_ms ? 1 : 0];
  if (index < 0) {
    std::string reason = failed.reason;
    if (blocked) reason += DescribeBlocked(*p.plan.reservation, t.spec, p.View());
    index = static_cast<int32_t>(p.plan.verdicts.size());
    p.plan.verdicts.push_back({failed.report, std::move(reason)});
  }
  return static_cast<uint32_t>(index);
}

void PassPlanner::PlanWithParked(const std::vector<QueueKey>& snapshot, Planning& p) const {
  struct Cursor {
    const Shape* shape;
    const ParkedQueue::Group* group;
    std::set<QueueKey>::const_iterator next;  // the group's first task this pass has not placed
    int64_t placed = 0;  // visited on their own: placed, or the one that reserved
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
    const Task& head_task = *GetTask(head);
    // As PlanPlace would answer it: on the memo of its view (the blocked one while GPUs are
    // reserved for another task), never from the memo when it would reserve.
    const bool blocked = !CanBackfill(head_task, p);
    auto& memo = blocked ? p.failed_shapes_blocked : p.failed_shapes;
    bool visited = false;
    PlacementReport report;
    std::string reason;
    if (auto it = memo.find(*first->shape); it != memo.end() && !WouldReserve(head_task, p)) {
      report = it->second.report;
      reason = it->second.reason;
      if (blocked) reason += DescribeBlocked(*p.plan.reservation, head_task.spec, p.View());
    } else {
      if (PlanPlace(head_task, p, false)) {
        ++first->next;
        ++first->placed;
        continue;
      }
      if (p.plan.reservation && p.plan.reservation->task == head) {
        ++first->next;  // it waits with its own words, the holder's; the next one is tried
        ++first->placed;
        continue;
      }
      visited = true;
      TakeBackWait(p.plan, head, report, reason);  // it waits with its group, below
    }
    const int64_t waiting = static_cast<int64_t>(first->group->keys.size()) - first->placed;
    WaitParkedGroup(p.plan, head, waiting, visited, std::move(report), std::move(reason));
    first->next = first->group->keys.end();
  }
}

// Victims (issue 37, core/reclaim.h): on a node where `t` can run, the smallest set of
// other teams' tasks, taken from the teams furthest above their guarantee; ties by id.
// Tasks this plan assigned count as assigned now.
bool PassPlanner::PlanReclaim(const Task& t, const ResourceRequest& req, Planning& p) const {
  const std::string team = TeamOf(t.spec);
  std::vector<ReclaimCandidate> candidates;
  auto consider = [&](const Task& v, const Placement& placement) {
    const std::string vt = TeamOf(v.spec);
    if (vt == team || v.spec.gpus == 0 || v.spec.nodes > 1) return;  // gangs: never partly
    candidates.push_back({v.id, vt, placement});
  };
  for (TaskId id : tasks_.active()) {
    if (p.stopped.count(id) > 0) continue;
    const Task& v = *GetTask(id);
    consider(v, *v.placement);
  }
  for (const auto& [id, placement] : p.assigned) consider(*GetTask(id), placement);
  const std::optional<ReclaimChoice> choice =
      ChooseReclaim(p.View(), req.shape, ledger_.quotas(), p.usage, candidates);
  if (!choice) return false;
  // Placed by the Placer itself (its GPU order, topology rules and options), on a trial first:
  // the plan changes only when the task is placed.
  ClusterState trial = p.View();
  for (size_t i : choice->victims) trial.Release(candidates[i].placement);
  PlacementResult result = resources_.AnswerOn(trial, req);
  // Not placed: e.g. use_reported_free (the victims still hold the memory). Placed elsewhere:
  // a node it was only kept off by a gang's reservation; stopping the victims would not help.
  if (!result.placed() || result.placement.node_index != choice->node_index) return false;
  PlanStep step;
  step.kind = PlanStep::Kind::kReclaim;
  step.task = t.id;
  step.reason = DescribeQuotaState(team, p.usage[team], ledger_.quotas().Of(team));
  DurationMs ready_in = 0;  // the longest grace a victim gets (CommitPlan)
  for (size_t i : choice->victims) {
    const ReclaimCandidate& v = candidates[i];
    p.Release(v.placement);
    AddUsage(p.usage[v.team], v.placement, -1);
    step.victims.push_back(v.id);
    ready_in = std::max(ready_in, GetTask(v.id)->spec.grace_ms.value_or(
                                      config_.preemption_grace_ms));
  }
  step.reason += "; " + DescribeReclaim(*choice, ready_in);
  for (TaskId id : step.victims) {
    p.stopped.insert(id);
    p.assigned.erase(id);
  }
  p.Reserve(result.placement);
  AddUsage(p.usage[team], result.placement, +1);
  p.assigned[t.id] = result.placement;
  step.placement = std::move(result.placement);
  step.report = std::move(result.report);
  p.plan.steps.push_back(std::move(step));
  return true;
}

// ---------------------------------------------------------------- gangs

namespace {

std::string GangShape(const TaskSpec& s) {
  return "gang of " + std::to_string(s.nodes) + " nodes x " + std::to_string(s.gpus) + " GPUs";
}

}  // namespace

bool PassPlanner::CanBackfill(const Task& t, const Planning& p) const {
  return !p.plan.reservation ||
         MayBackfill(t.id, t.spec, *p.plan.reservation, clock_.NowMs(),
                     config_.backfill_by_expected_duration);
}

bool PassPlanner::PlaceGangOn(ClusterState& view, const ResourceRequest& req, int64_t nodes,
                            std::vector<Placement>* ranks, PlacementReport* report,
                            std::string* why) const {
  ranks->clear();
  // Cheap count first: fewer nodes pass the filters than there are ranks.
  const FilterOptions& fo = resources_.placer().options().filter;
  int64_t fit = 0;
  for (size_t i = 0; i < view.size() && fit < nodes; ++i) {
    if (FirstRejectingFilterFast(view.summary(i), view.node(i), req.shape, fo) == kNumFilters) {
      ++fit;
    }
  }
  if (fit < nodes) {
    PlacementResult r = resources_.AnswerOn(view, req);
    *report = std::move(r.report);
    *why = std::to_string(fit) + " of " + std::to_string(nodes) + " nodes fit now" +
           (r.placed() ? std::string() : ": " + r.reason);
    return false;
  }
  // Rank by rank, each on a node the earlier ranks did not take: reserved and cordoned in the
  // view, then undone in reverse order (a copy of the view per try was a third of a replay's
  // time), so the caller's view ends as it was.
  std::vector<bool> was_cordoned;
  bool placed_all = true;
  for (int64_t rank = 0; rank < nodes; ++rank) {
    PlacementResult r = resources_.AnswerOn(view, req);
    if (rank == 0) *report = r.report;
    if (!r.placed()) {
      *why = std::to_string(rank) + " of " + std::to_string(nodes) + " nodes fit now: " + r.reason;
      placed_all = false;
      break;
    }
    view.Reserve(r.placement);
    was_cordoned.push_back(view.node(r.placement.node_index).cordoned);
    view.Update(r.placement.node_index, [](NodeState& n) { n.cordoned = true; });
    ranks->push_back(std::move(r.placement));
  }
  for (size_t i = ranks->size(); i-- > 0;) {
    const Placement& at = (*ranks)[i];
    const bool cordoned = was_cordoned[i];
    view.Update(at.node_index, [cordoned](NodeState& n) { n.cordoned = cordoned; });
    view.Release(at);
  }
  if (!placed_all) ranks->clear();
  return placed_all;
}

std::optional<Reservation> PassPlanner::PlanReservation(const Task& t, const ResourceRequest& req,
                                                      const Planning& p) const {
  const TimeMs now = clock_.NowMs();
  const ClusterState& view = p.View();
  // What holds each node in the plan's view: active tasks not stopped by the plan, and the
  // plan's own assignments (they start now).
  std::vector<std::vector<Holding>> holdings(view.size());
  auto hold = [&](const Task& v, TimeMs assigned_ms, const Placement& at) {
    holdings[at.node_index].push_back(
        {v.id, EndOfAttempt(v.spec, assigned_ms, v.attained_ms, now), &at});
  };
  for (TaskId id : tasks_.active()) {
    if (p.stopped.count(id) > 0) continue;
    const Task& v = tasks_.At(id);
    hold(v, v.assigned_ms, *v.placement);
    for (const Placement& g : v.gang_placements) hold(v, v.assigned_ms, g);
  }
  for (const PlanStep& step : p.plan.steps) {
    if (step.kind != PlanStep::Kind::kAssign && step.kind != PlanStep::Kind::kReclaim &&
        step.kind != PlanStep::Kind::kPreempt) {
      continue;
    }
    const Task& v = tasks_.At(step.task);
    hold(v, now, step.placement);
    for (const Placement& g : step.gang) hold(v, now, g);
  }
  std::optional<Reservation> r =
      PlanEarliestStart(t.id, view, req.shape, std::max<int64_t>(1, t.spec.nodes),
                        std::move(holdings), resources_.placer().options().filter, now);
  if (r && p.plan.reservation && p.plan.reservation->task == t.id) {
    r->since_ms = p.plan.reservation->since_ms;  // the same hold, planned anew
  }
  return r;
}

bool PassPlanner::WouldReserve(const Task& t, const Planning& p) const {
  if (!IsWide(t.spec)) return false;
  if (!(t.spec.nodes > 1 ? config_.gang_reservation : config_.wide_task_reservation)) return false;
  return !p.plan.reservation || p.plan.reservation->task == t.id;
}

void PassPlanner::PlanHold(const Task& t, const ResourceRequest& req, Planning& p,
                         std::string& reason) const {
  if (!WouldReserve(t, p)) return;
  const TimeMs now = clock_.NowMs();
  if (now < t.gang_reserve_after_ms) {
    reason += std::string("; ") + (t.spec.nodes > 1 ? "gang" : "reservation") +
              " timeout: may reserve again in " + FormatDurationMs(t.gang_reserve_after_ms - now);
    return;
  }
  // Planned anew at every visit: the start moves earlier as tasks end early (it never moves
  // later while the ends it waits for are time limits), and a task that backfilled counts
  // with its own time limit.
  p.SetReservation(PlanReservation(t, req, p));
  if (p.plan.reservation) reason += "; " + DescribeReservation(*p.plan.reservation, p.View(), now);
}

void PassPlanner::PlanHolderFirst(Planning& p) const {
  if (!p.plan.reservation || !ledger_.quotas().empty()) return;  // under quotas: at its turn (t2)
  const Task& t = *GetTask(p.plan.reservation->task);
  if (t.queue != QueueMembership::kFailure) return;  // in Q: the walk visits it in order
  // A flush or release pass with parked groups visits the parked tasks itself.
  if ((flush_pass_due_ || capacity_event_) && parked_.Find(t.id) != nullptr) return;
  p.tried_first = t.id;
  PlanPlace(t, p, false);
}

bool PassPlanner::PlanGang(const Task& t, Planning& p) const {
  const ResourceRequest req = MakeRequest(t);
  ++p.plan.decisions;
  PlanStep step;
  step.task = t.id;
  const bool holder = p.plan.reservation && p.plan.reservation->task == t.id;
  const bool blocked = !CanBackfill(t, p);
  std::vector<Placement> ranks;
  std::string why;
  // Capacity only shrinks within a pass: a gang shape that found too few nodes fails again
  // (unless it could preempt).
  const bool may_preempt = MayPreemptByPriority(t);
  const bool plain = config_.memoize_failed_shapes && t.spec.node_selector.empty() &&
                     t.spec.tolerations.empty() && !may_preempt;
  const auto key = std::make_tuple(ShapeOf(req), t.spec.nodes, blocked);
  auto memo = plain ? p.failed_gangs.find(key) : p.failed_gangs.end();
  if (memo != p.failed_gangs.end()) {
    ++p.plan.memo_hits;
    step.report = memo->second.first;
    why = memo->second.second;
  } else if (PlaceGangOn(blocked ? p.MutableBlocked() : p.Mutable(), req, t.spec.nodes, &ranks,
                         &step.report, &why)) {
    if (holder) p.SetReservation(std::nullopt);
    for (const Placement& r : ranks) p.Reserve(r);
    if (!ledger_.quotas().empty()) {
      TeamUsage& u = p.usage[TeamOf(t.spec)];
      for (const Placement& r : ranks) AddUsage(u, r, +1);
      u.tasks -= t.spec.nodes - 1;  // one task
    }
    step.kind = PlanStep::Kind::kAssign;
    step.placement = std::move(ranks.front());
    step.gang.assign(std::make_move_iterator(ranks.begin() + 1),
                     std::make_move_iterator(ranks.end()));
    p.plan.steps.push_back(std::move(step));
    return true;
  }
  if (plain && memo == p.failed_gangs.end()) {
    p.failed_gangs.emplace(key, std::pair(step.report, why));
  }
  if (may_preempt && PlanPreempt(t, req, p)) {
    if (holder) p.SetReservation(std::nullopt);
    p.CapacityGrew();
    return true;
  }
  std::string reason = GangShape(t.spec) + ": " + why;
  if (blocked) reason += DescribeBlocked(*p.plan.reservation, t.spec, p.View());
  PlanHold(t, req, p, reason);
  step.kind = PlanStep::Kind::kWait;
  step.reason = std::move(reason);
  p.plan.steps.push_back(std::move(step));
  return false;
}

// ---------------------------------------------------------------- priority preemption

struct PassPlanner::PreemptCandidate {
  const Task* task;
  int64_t procs;  // tasks disrupted: a gang counts as its nodes
  int64_t lost;   // GPU-ms of progress since the attempt started
};

struct PassPlanner::VictimSet {
  int64_t procs = 0, lost = 0;
  std::vector<size_t> victims;  // candidate indices, ascending
  size_t node = 0;
  // Fewer tasks, less progress lost, lower candidate indices, then the node's name.
  bool CheaperThan(const VictimSet& b, const ClusterState& view) const {
    if (procs != b.procs) return procs < b.procs;
    if (lost != b.lost) return lost < b.lost;
    if (victims != b.victims) return victims < b.victims;
    return view.node(node).name < view.node(b.node).name;
  }
};

namespace {

// `at` released from (sign +1) or reserved again on (sign -1) a trial copy of its node.
void ApplyToTrial(NodeState& trial, const Placement& at, int sign) {
  trial.allocated.cpu_milli -= sign * at.resources.cpu_milli;
  trial.allocated.mem_mib -= sign * at.resources.mem_mib;
  for (size_t k = 0; k < at.gpus.size(); ++k) {
    GpuState& g = trial.gpus[static_cast<size_t>(at.gpus[k])];
    g.allocated_mib -= sign * at.gpu_mem_mib[k];
    g.tasks -= sign;
  }
}

}  // namespace

std::vector<PassPlanner::PreemptCandidate> PassPlanner::PreemptCandidates(
    const Task& t, const Planning& p, std::vector<std::vector<size_t>>& on_node) const {
  const TimeMs now = clock_.NowMs();
  const int64_t preempting = PreemptingPriority(t);
  std::vector<PreemptCandidate> cands;
  for (TaskId id : tasks_.active()) {
    if (p.stopped.count(id) > 0) continue;
    const Task& v = tasks_.At(id);
    if (!v.spec.preemptible || v.priority >= preempting) continue;
    const int64_t lost = std::max<DurationMs>(0, now - v.assigned_ms) * TotalGpus(v.spec);
    cands.push_back({&v, 1 + static_cast<int64_t>(v.gang_placements.size()), lost});
    on_node[v.placement->node_index].push_back(cands.size() - 1);
    for (const Placement& g : v.gang_placements) on_node[g.node_index].push_back(cands.size() - 1);
  }
  return cands;
}

std::optional<PassPlanner::VictimSet> PassPlanner::CheapestVictimsOn(
    const ClusterState& view, size_t i, const PlacementRequest& shape,
    const std::vector<PreemptCandidate>& cands, const std::vector<size_t>& here) const {
  const FilterOptions& fo = resources_.placer().options().filter;
  const size_t n = std::min<size_t>(here.size(), 12);
  std::optional<VictimSet> best;
  NodeState trial = view.node(i);
  // Every subset of the node's first 12 candidates (at most 4,095), cheapest kept.
  for (size_t mask = 1; mask < (size_t{1} << n); ++mask) {
    VictimSet c;
    c.node = i;
    for (size_t b = 0; b < n; ++b) {
      if ((mask & (size_t{1} << b)) == 0) continue;
      c.procs += cands[here[b]].procs;
      c.lost += cands[here[b]].lost;
      c.victims.push_back(here[b]);
    }
    std::sort(c.victims.begin(), c.victims.end());
    if (best && !c.CheaperThan(*best, view)) continue;
    for (size_t v : c.victims) ApplyToTrial(trial, *PlacementOn(*cands[v].task, i), +1);
    const bool fits = FirstRejectingFilter(trial, shape, fo) == kNumFilters;
    for (size_t v : c.victims) ApplyToTrial(trial, *PlacementOn(*cands[v].task, i), -1);
    if (fits) best = std::move(c);
  }
  return best;
}

// Victims: running preemptible tasks of a lower priority value. A gang is one candidate with
// all its ranks. Per node, the smallest set of candidates holding a rank there that makes
// the request fit on that node: fewest tasks (a gang counts as its nodes), then least
// progress lost (GPU-ms since their assignment), then ids; the node whose set is smallest so
// wins (ties by name). A gang preemptor takes the `nodes` cheapest nodes and their victims.
bool PassPlanner::PlanPreempt(const Task& t, const ResourceRequest& req, Planning& p) const {
  std::vector<std::vector<size_t>> on_node(p.View().size());  // candidate indices per node
  const std::vector<PreemptCandidate> cands = PreemptCandidates(t, p, on_node);
  if (cands.empty()) return false;
  const bool blocked = !CanBackfill(t, p);
  const ClusterState& view = blocked ? p.Blocked() : p.View();
  const FilterOptions& fo = resources_.placer().options().filter;
  std::vector<VictimSet> per_node;  // the cheapest victim set of each node where one exists
  for (size_t i = 0; i < view.size(); ++i) {
    if (FirstRejectingFilter(view.node(i), req.shape, fo) == kNumFilters) {
      per_node.push_back({0, 0, {}, i});  // fits already (a gang's other ranks need victims)
      continue;
    }
    if (on_node[i].empty()) continue;
    std::optional<VictimSet> best = CheapestVictimsOn(view, i, req.shape, cands, on_node[i]);
    if (best) per_node.push_back(std::move(*best));
  }
  const size_t ranks = static_cast<size_t>(t.spec.nodes);
  if (per_node.size() < ranks) return false;
  std::sort(per_node.begin(), per_node.end(),
            [&](const VictimSet& a, const VictimSet& b) { return a.CheaperThan(b, view); });
  std::set<size_t> chosen;
  for (size_t k = 0; k < ranks; ++k) {
    chosen.insert(per_node[k].victims.begin(), per_node[k].victims.end());
  }
  if (chosen.empty()) return false;  // it fits without victims: not this path
  std::vector<const Task*> victims;
  for (size_t c : chosen) victims.push_back(cands[c].task);
  return PlanPreemptStep(t, req, victims, blocked, p);
}

bool PassPlanner::PlanPreemptStep(const Task& t, const ResourceRequest& req,
                                const std::vector<const Task*>& victims, bool blocked,
                                Planning& p) const {
  // Stop them in the trial and check that the task now fits (all ranks for a gang).
  ClusterState trial = blocked ? p.Blocked() : p.View();
  for (const Task* v : victims) {
    trial.Release(*v->placement);
    for (const Placement& g : v->gang_placements) trial.Release(g);
  }
  std::vector<Placement> placed;
  PlacementReport report;
  std::string why;
  if (!PlaceGangOn(trial, req, t.spec.nodes, &placed, &report, &why)) return false;
  PlanStep step;
  step.kind = PlanStep::Kind::kPreempt;
  step.task = t.id;
  for (const Task* v : victims) {
    p.Release(*v->placement);
    for (const Placement& g : v->gang_placements) p.Release(g);
    p.stopped.insert(v->id);
    step.victims.push_back(v->id);
  }
  // The same state as the trial: the same answer, now on the plan's view.
  ClusterState& after = blocked ? p.MutableBlocked() : p.Mutable();
  if (!PlaceGangOn(after, req, t.spec.nodes, &placed, &report, &why)) return false;
  for (const Placement& r : placed) p.Reserve(r);
  step.placement = std::move(placed.front());
  step.gang.assign(std::make_move_iterator(placed.begin() + 1),
                   std::make_move_iterator(placed.end()));
  step.report = std::move(report);
  p.plan.steps.push_back(std::move(step));
  return true;
}

}  // namespace gpusched::core
