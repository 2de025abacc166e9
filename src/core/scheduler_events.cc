// Scheduler events from agents and operators: the liveness verdicts (LivenessRules) applied,
// node registration, heartbeats and reconciliation, cordon and drain, task reports, cancel,
// preemption, and restoring tasks after a restart. The admission, the passes and the queries
// are in scheduler.cc.

#include <algorithm>
#include <limits>

#include "core/scheduler.h"

#include "base/check.h"

#include "core/preemption.h"

namespace gpusched::core {
// ---------------------------------------------------------------- liveness

// The verdicts of LivenessRules (CN109992422A claims 5-8, issue 37; README.md "Node loss"),
// applied in the order the rules give them.
void Scheduler::CheckNodeLiveness(TimeMs now) {
  NodeVerdicts v = liveness_.CheckNodes(now, cluster().nodes());
  for (size_t i : v.unavailable) {
    resources_.Update(i, [](NodeState& m) { m.available = false; });
    pass_requested_ = true;
    capacity_event_ = true;  // node facts changed: the reasons of waiting tasks are redone
  }
  for (const NodeVerdicts::Loss& loss : v.lost) LoseNode(loss.index, loss.reason);
}

void Scheduler::LoseNode(size_t index, const std::string& reason) {
  resources_.Update(index, [](NodeState& m) {
    m.available = false;
    m.lost = true;
  });
  ++stats_.nodes_lost;
  const std::vector<TaskId>& on_node = resources_.TasksOn(index);
  const std::vector<TaskId> victims(on_node.begin(), on_node.end());
  for (TaskId id : victims) {
    Task& t = *Find(id);
    KillGang(t, reason);  // its ranks on the nodes that are still there
    FailExecution(t, reason, Failure::kNodeLost);
  }
}

void Scheduler::ForgiveSilence(DurationMs paused) {
  const TimeMs now = clock_.NowMs();
  for (size_t i = 0; i < cluster().size(); ++i) {
    if (cluster().node(i).lost) continue;
    resources_.Update(i, [&](NodeState& m) {
      m.last_heartbeat_ms = LivenessRules::Forgiven(now, m.last_heartbeat_ms, paused);
    });
  }
  for (TaskId id : tasks_.active()) {
    Task& t = *Find(id);
    t.last_heartbeat_ms = LivenessRules::Forgiven(now, t.last_heartbeat_ms, paused);
  }
}

// Claims 7-8: a task silent or hung past task_timeout is killed on its node and retried like
// a failed execution.
void Scheduler::CheckTaskLiveness(TimeMs now) {
  if (!liveness_.TaskScanDue(now)) return;  // the common case: no scan, no view to build
  std::vector<TaskVerdict> reclaim =
      liveness_.CheckTasks(now, TaskViews(tasks_.active()), cluster().nodes());
  for (const TaskVerdict& v : reclaim) {
    Task& t = *Find(v.id);
    PushKill(t, v.reason);
    ++stats_.tasks_reclaimed;
    FailExecution(t, v.reason, Failure::kHung);
  }
}

std::vector<const Task*> Scheduler::TaskViews(const std::set<TaskId>& ids) const {
  std::vector<const Task*> views;
  views.reserve(ids.size());
  for (TaskId id : ids) views.push_back(tasks_.Find(id));
  return views;
}

// Slurm's --time: killed (SIGTERM, the kill grace, SIGKILL) and failed without a retry.
void Scheduler::CheckTimeLimits(TimeMs now) {
  if (tasks_.time_limited().empty()) return;
  for (const TaskVerdict& v :
       LivenessRules::CheckTimeLimits(now, TaskViews(tasks_.time_limited()))) {
    Task& t = *Find(v.id);
    PushKill(t, "time limit");
    FailPermanently(t, v.reason, Failure::kTimeout);
  }
}

// ---------------------------------------------------------------- node events

Status Scheduler::RegisterNode(const NodeSpec& spec) {
  if (auto known = cluster().Find(spec.name); known && !cluster().node(*known).available) {
    // Back from silence (issue 37): its tasks were not silent by their own doing. Those its
    // agent does not run are re-queued by the reconciliation that follows.
    for (TaskId id : resources_.TasksOn(*known)) {
      Task& t = *Find(id);
      if (!IsHung(t.executor_status)) t.last_heartbeat_ms = clock_.NowMs();
    }
  }
  GS_ASSIGN_OR_RETURN(size_t index, resources_.RegisterNode(spec, clock_.NowMs()));
  liveness_.NodeHeardFrom(clock_.NowMs());
  (void)index;
  pass_requested_ = true;
  capacity_event_ = true;  // a node joined (or grew): tasks waiting for capacity take part
  return Status::Ok();
}

Status Scheduler::HandleNodeHeartbeat(const NodeHeartbeat& hb) {
  auto index = cluster().Find(hb.node);
  if (!index) return NotFound("node " + hb.node + ": not registered");
  const NodeState& n = cluster().node(*index);
  if (!hb.gpu_free_mib.empty() && hb.gpu_free_mib.size() != n.gpus.size()) {
    return InvalidArgument("gpu_free_mib: " + std::to_string(hb.gpu_free_mib.size()) +
                           " values for a node with " + std::to_string(n.gpus.size()) + " GPUs");
  }
  if (!hb.gpu_health.empty() && hb.gpu_health.size() != n.gpus.size()) {
    return InvalidArgument("gpu_health: " + std::to_string(hb.gpu_health.size()) +
                           " values for a node with " + std::to_string(n.gpus.size()) + " GPUs");
  }
  const bool was_silent = !n.available;
  if (was_silent) {  // a node that comes back is eligible again
    pass_requested_ = true;
    capacity_event_ = true;
  }
  ApplyGpuHealth(*index, hb.gpu_health);
  const TimeMs now = clock_.NowMs();
  resources_.Update(*index, [&](NodeState& m) {
    m.available = true;
    m.lost = false;
    m.last_heartbeat_ms = now;
    for (size_t g = 0; g < hb.gpu_free_mib.size(); ++g) {
      m.gpus[g].reported_free_mib = hb.gpu_free_mib[g];
    }
  });
  // Reconcile: what the agent runs but the scheduler did not (or no longer) place there.
  for (const auto& [id, attempt] : hb.running) {
    const Task* t = GetTask(id);
    const bool ours = t != nullptr && IsActive(*t) && PlacementOn(*t, *index) != nullptr &&
                      t->attempts == attempt;
    if (ours) {
      // Its node, back from silence, speaks for it: a task is not reclaimed for the silence
      // of its node (issue 37). A hung one stays as silent as it was (claim 8).
      if (was_silent && !IsHung(t->executor_status)) Find(id)->last_heartbeat_ms = now;
    } else {
      Action a;
      a.kind = Action::Kind::kKill;
      a.task = id;
      a.node = n.name;
      a.attempt = attempt;
      a.reason = "not assigned to this node (reconciled after reconnect)";
      actions_.push_back(std::move(a));
    }
  }
  return Status::Ok();
}

// A GPU that turns unhealthy is out at once: the tasks holding it are killed and requeued
// (not counted as their failure) with the fault as the reason; one that turns healthy again
// takes tasks at the next pass.
void Scheduler::ApplyGpuHealth(size_t index, const std::vector<NodeHeartbeat::GpuHealth>& health) {
  const NodeState& n = cluster().node(index);
  std::vector<int> failed;
  bool changed = false;
  for (size_t g = 0; g < health.size(); ++g) {
    const GpuState& gpu = n.gpus[g];
    if (gpu.healthy == health[g].healthy && gpu.last_error == health[g].error) continue;
    changed = true;
    if (gpu.healthy && !health[g].healthy) failed.push_back(static_cast<int>(g));
  }
  if (!changed) return;
  resources_.Update(index, [&](NodeState& m) {
    for (size_t g = 0; g < health.size(); ++g) {
      m.gpus[g].healthy = health[g].healthy;
      m.gpus[g].last_error = health[g].error;
    }
  });
  pass_requested_ = true;
  capacity_event_ = true;
  if (failed.empty()) return;
  const std::string node = n.name;
  // In id order (TasksOn is ordered): the requeued tasks keep their relative order.
  const std::vector<TaskId>& on_node = resources_.TasksOn(index);
  const std::vector<TaskId> tasks(on_node.begin(), on_node.end());
  for (TaskId id : tasks) {
    Task& t = *Find(id);
    const Placement* here = PlacementOn(t, index);
    if (here == nullptr) continue;
    int hit = -1;
    for (int g : here->gpus) {
      if (std::find(failed.begin(), failed.end(), g) != failed.end()) hit = g;
    }
    if (hit < 0) continue;
    const std::string reason = "GPU " + std::to_string(hit) + " of node " + node +
                               " unhealthy: " + health[static_cast<size_t>(hit)].error;
    PushKill(t, reason);
    Requeue(t, reason);
  }
}

Status Scheduler::SetNodeReachable(const std::string& node, bool reachable) {
  auto index = cluster().Find(node);
  if (!index) return UnknownNode(node);
  if (cluster().node(*index).reachable != reachable) {
    pass_requested_ = true;
    capacity_event_ = true;
  }
  resources_.Update(*index, [&](NodeState& m) { m.reachable = reachable; });
  return Status::Ok();
}

// Issue 41: "node x: no such node (nodes: dev-1, dev-2)", so a typo shows the right name.
Status Scheduler::UnknownNode(const std::string& node) const {
  constexpr size_t kListed = 20;
  std::string names;
  size_t n = 0;
  for (const NodeState& s : cluster().nodes()) {
    if (n++ < kListed) names += (names.empty() ? "" : ", ") + s.name;
  }
  if (n > kListed) names += ", ... (" + std::to_string(n) + " in all: gpusched nodes)";
  return NotFound("node " + node + ": no such node (" +
                  (names.empty() ? "no node has registered" : "nodes: " + names) + ")");
}

Status Scheduler::Cordon(const std::string& node, bool cordoned) {
  auto index = cluster().Find(node);
  if (!index) return UnknownNode(node);
  resources_.Update(*index, [&](NodeState& m) {
    m.cordoned = cordoned;
    if (!cordoned) m.draining = false;
  });
  pass_requested_ = true;
  // Node facts changed: an uncordon releases capacity, and either way the tasks waiting in
  // FQ get their reasons redone in the pass (issue 37).
  capacity_event_ = true;
  return Status::Ok();
}

Status Scheduler::Drain(const std::string& node, bool evict) {
  auto index = cluster().Find(node);
  if (!index) return UnknownNode(node);
  resources_.Update(*index, [](NodeState& m) {
    m.cordoned = true;
    m.draining = true;
  });
  pass_requested_ = true;
  capacity_event_ = true;  // node facts changed
  if (!evict) return Status::Ok();
  const std::vector<TaskId>& on_node = resources_.TasksOn(*index);
  const std::vector<TaskId> tasks(on_node.begin(), on_node.end());
  for (TaskId id : tasks) {
    Task& t = *Find(id);
    PushKill(t, "node draining");
    Requeue(t, "node " + node + " drained (--evict)");
  }
  return Status::Ok();
}

StatusOr<std::vector<TaskId>> Scheduler::RemoveNode(const std::string& node, bool force) {
  auto index = cluster().Find(node);
  if (!index) return UnknownNode(node);
  const std::vector<TaskId>& on_node = resources_.TasksOn(*index);
  const std::vector<TaskId> tasks(on_node.begin(), on_node.end());
  if (!tasks.empty() && !force) {
    std::string ids;
    for (TaskId id : tasks) ids += (ids.empty() ? "" : ", ") + id.ToString();
    return FailedPrecondition("node " + node + " has " + std::to_string(tasks.size()) +
                              " assigned or running task(s) (" + ids +
                              "): drain it first, or use --force to requeue them");
  }
  for (TaskId id : tasks) {
    Task& t = *Find(id);
    PushKill(t, "node " + node + " removed");
    Requeue(t, "node " + node + " removed (node rm --force)");
  }
  ForgetNodeIndex(*index);
  awaited_nodes_.erase(node);
  pass_requested_ = true;
  capacity_event_ = true;  // node facts changed: FQ's reasons are redone
  return tasks;
}

// The node at `index` leaves the table; what holds a later index moves down by one.
void Scheduler::ForgetNodeIndex(size_t index) {
  resources_.RemoveNode(index);
  for (auto& [id, t] : tasks_.records()) {
    if (!t.placement) continue;
    GS_CHECK(t.placement->node_index != index);
    if (t.placement->node_index > index) --t.placement->node_index;
    for (Placement& g : t.gang_placements) {
      if (g.node_index > index) --g.node_index;
    }
  }
  if (!reservation_) return;
  for (ReservedNode& r : reservation_->nodes) {
    if (r.index == index) {  // reserved there: planned again by the next pass
      reservation_.reset();
      return;
    }
    if (r.index > index) --r.index;
  }
}

Status Scheduler::ApplyLiveConfig(const SchedulerConfig& next) {
  SchedulerConfig merged = config_;
  merged.TakeLiveFields(next);
  GS_RETURN_IF_ERROR(merged.Validate());
  const bool lazy = LazyFlushActive();
  config_.TakeLiveFields(next);  // not a whole copy: parts of config_ are lent by reference
  // A finite max_placement_failures turns the lazy flush off: its parked tasks go back to FQ.
  if (lazy && !LazyFlushActive()) UnparkAll();
  const TimeMs now = clock_.NowMs();
  next_pass_ms_ = std::min(next_pass_ms_, now + config_.t1_ms);
  next_fq_flush_ms_ = std::min(next_fq_flush_ms_, now + config_.t2_ms);
  pass_requested_ = true;
  return Status::Ok();
}

// ---------------------------------------------------------------- task events

Status Scheduler::CheckAttempt(const Task* t, TaskId id, int64_t attempt) const {
  if (t == nullptr) return NotFound("task " + id.ToString() + ": no such task");
  if (!IsActive(*t) || t->attempts != attempt) {
    return FailedPrecondition("task " + id.ToString() + " attempt " + std::to_string(attempt) +
                              ": not the current assignment (task is " +
                              TaskStateName(t->state) + ", attempt " +
                              std::to_string(t->attempts) + ")");
  }
  return Status::Ok();
}

// Issue 37: a success that arrives after its attempt was given up (its node lost) and before
// a newer attempt was assigned ends the task rather than running it again. A failure of that
// attempt was already counted when it was given up, so only a success is taken late.
bool Scheduler::IsLateSuccess(const Task* t, int64_t attempt, int exit_code) const {
  return t != nullptr && exit_code == 0 && t->state == TaskState::kPending && !t->placement &&
         attempt > 0 && t->attempts == attempt && t->spec.nodes <= 1;
}

Status Scheduler::TaskStarted(TaskId id, int64_t attempt) {
  Task* t = Find(id);
  GS_RETURN_IF_ERROR(CheckAttempt(t, id, attempt));
  t->last_heartbeat_ms = clock_.NowMs();
  liveness_.HeardFrom(t->last_heartbeat_ms);
  if (t->state == TaskState::kAssigned) {
    SetState(*t, TaskState::kRunning, "running on " + t->placement->node);
    t->gpu_util = -1;  // a new attempt: its idle clock starts now
    t->gpu_mem_used_mib = -1;
    t->busy_ms = t->last_heartbeat_ms;
    t->idle = false;
    t->executor_status = ExecutorStatus::kUnreported;
    t->executor_detail.clear();
  }
  return Status::Ok();
}

Status Scheduler::TaskHeartbeat(TaskId id, int64_t attempt, std::optional<GpuUsage> usage,
                                ExecutorReport executor) {
  Task* t = Find(id);
  GS_RETURN_IF_ERROR(CheckAttempt(t, id, attempt));
  // CN109992422A claim 7: t.last = now, t.status = status; a hung task is not alive (claim 8).
  const TimeMs now = clock_.NowMs();
  t->executor_status = executor.status;
  t->executor_detail = IsHung(executor.status) ? std::move(executor.detail) : std::string();
  if (!IsHung(executor.status)) {
    t->last_heartbeat_ms = now;
    liveness_.HeardFrom(now);
  }
  if (usage && t->state == TaskState::kRunning) {  // claim 7: the executor's status
    t->gpu_util = usage->util;
    t->gpu_mem_used_mib = usage->mem_used_mib;
    // Busy now, or the first report since a restart (busy_ms is not stored): the idle clock
    // starts again.
    if (usage->util > 0 || t->busy_ms == 0) t->busy_ms = now;
    gpu_reporting_.insert(id);
  }
  return Status::Ok();
}

std::vector<TaskId> Scheduler::MarkIdle(DurationMs idle_after) {
  std::vector<TaskId> idle;
  const TimeMs now = clock_.NowMs();
  for (auto it = gpu_reporting_.begin(); it != gpu_reporting_.end();) {
    Task* t = Find(*it);
    if (t == nullptr || t->state != TaskState::kRunning || t->gpu_util < 0) {
      if (t != nullptr) t->idle = false;
      it = gpu_reporting_.erase(it);
      continue;
    }
    t->idle = idle_after > 0 && t->gpu_util == 0 && now - t->busy_ms >= idle_after;
    if (t->idle) idle.push_back(*it);
    ++it;
  }
  idle_tasks_ = idle.size();
  return idle;
}

Status Scheduler::StopIdle(TaskId id, const std::string& reason) {
  Task* t = Find(id);
  if (t == nullptr || t->state != TaskState::kRunning) {
    return FailedPrecondition("task " + id.ToString() + " is not running");
  }
  PushKill(*t, reason);
  ReleasePlacement(*t);
  RemoveFromQueues(*t);
  t->claim = ClaimStatus::kFailed;
  t->idle = false;
  t->finished_ms = clock_.NowMs();
  t->failure = Failure::kIdle;
  SetState(*t, TaskState::kFailed, reason);  // no retry: rerunning it would idle again
  return Status::Ok();
}

Status Scheduler::TaskFinished(TaskId id, int64_t attempt, int exit_code, MiB peak_gpu_mem_mib,
                               const std::string& reason, FinishCause cause) {
  Task* t = Find(id);
  if (t != nullptr && ApplyPreemptedExit(*t, attempt, exit_code)) return Status::Ok();
  const bool late_success = IsLateSuccess(t, attempt, exit_code);
  if (!late_success) GS_RETURN_IF_ERROR(CheckAttempt(t, id, attempt));
  // Dated when it ended, never before what the record already says nor after now; for
  // this call only, whichever way it leaves. No time given: now.
  if (cause.ended_ms > 0) {
    const TimeMs latest = t->history.empty() ? 0 : t->history.back().at_ms;
    event_time_ms_ = std::max(latest, std::min(cause.ended_ms, clock_.NowMs()));
  }
  struct Reset {
    std::optional<TimeMs>& at;
    ~Reset() { at.reset(); }
  } reset{event_time_ms_};
  if (late_success) {
    RemoveFromQueues(*t);
    t->exit_code = 0;
    t->finished_ms = EventTimeMs();
    SetState(*t, TaskState::kSucceeded, "exited 0 (reported after its node was given up; no "
                                        "newer attempt had been assigned)");
    return Status::Ok();
  }
  return ApplyFinish(*t, exit_code, peak_gpu_mem_mib, reason, cause);
}

Status Scheduler::ApplyFinish(Task& task, int exit_code, MiB peak_gpu_mem_mib,
                              const std::string& reason, FinishCause cause) {
  Task* t = &task;
  if (peak_gpu_mem_mib > 0 && t->spec.profile && cause.learn_memory) {
    memory_table_.Observe(*t->spec.profile, peak_gpu_mem_mib);
  }
  if (t->state == TaskState::kAssigned) {
    // An end implies a start: its start report was lost or is still in flight.
    SetState(*t, TaskState::kRunning, "running on " + t->placement->node);
  }
  t->exit_code = exit_code;
  if (exit_code == 0) {
    ReleasePlacement(*t);
    t->finished_ms = EventTimeMs();
    t->claim = ClaimStatus::kScheduled;  // CN115981827A claim 7: status 0, executed successfully
    SetState(*t, TaskState::kSucceeded, reason.empty() ? "exited 0" : reason);
    return Status::Ok();
  }
  if (cause.permanent) {
    KillGang(*t, reason);
    FailPermanently(*t, reason, Failure::kLaunch);
    return Status::Ok();
  }
  KillGang(*t, reason.empty() ? "exited with code " + std::to_string(exit_code) : reason);
  std::string why = reason.empty() ? "exited with code " + std::to_string(exit_code) : reason;
  const bool retried = t->fail_cnt + 1 <= t->spec.max_retries.value_or(config_.fail_max);
  if (cause.gpu_mem_exceeded && !t->exclusive && t->spec.gpus > 0) {
    const MiB before = t->gpu_mem_need_mib;
    GrowAfterMemoryFailure(*t, peak_gpu_mem_mib, retried, cause.learn_memory);
    why += retried ? " (GPU memory share exceeded; retried with " +
                         FormatSizeMiB(t->gpu_mem_need_mib) + " instead of " +
                         FormatSizeMiB(before) + ")"
                   : " (GPU memory share exceeded)";
  }
  FailExecution(*t, why,
                cause.out_of_memory || cause.gpu_mem_exceeded ? Failure::kOutOfMemory
                                                              : Failure::kExit);
  return Status::Ok();
}

// "all 2 ranks exited 0"; with several processes per node "all 8 processes on 2 nodes
// exited 0" (issue 41: it said "all 2 ranks" of 8 processes).
static std::string AllRanksExited(int nodes, int64_t per_node) {
  if (per_node <= 1) return "all " + std::to_string(nodes) + " ranks exited 0";
  return "all " + std::to_string(nodes * per_node) + " processes on " + std::to_string(nodes) +
         " nodes exited 0";
}

Status Scheduler::RankFinished(TaskId id, int64_t attempt, const std::string& node,
                               int exit_code, MiB peak_gpu_mem_mib, const std::string& reason,
                               FinishCause cause) {
  Task* t = Find(id);
  // A preempted attempt's exit (a gang's: its first rank to exit 0 counts the checkpoint).
  if (t != nullptr && ApplyPreemptedExit(*t, attempt, exit_code)) return Status::Ok();
  if (IsLateSuccess(t, attempt, exit_code)) {
    return TaskFinished(id, attempt, exit_code, peak_gpu_mem_mib, reason, cause);
  }
  GS_RETURN_IF_ERROR(CheckAttempt(t, id, attempt));
  if (t->gang_placements.empty()) {
    return TaskFinished(id, attempt, exit_code, peak_gpu_mem_mib, reason, cause);
  }
  const int ranks = static_cast<int>(t->gang_placements.size()) + 1;
  int rank = t->placement->node == node ? 0 : -1;
  for (int r = 1; r < ranks && rank < 0; ++r) {
    if (t->gang_placements[static_cast<size_t>(r - 1)].node == node) rank = r;
  }
  if (rank < 0) {
    return FailedPrecondition("task " + id.ToString() + " has no rank on node " + node);
  }
  if (exit_code == 0) {
    if (peak_gpu_mem_mib > 0 && t->spec.profile && cause.learn_memory) {
      memory_table_.Observe(*t->spec.profile, peak_gpu_mem_mib);
    }
    t->ranks_done.insert(rank);
    if (static_cast<int>(t->ranks_done.size()) < ranks) {
      if (t->state == TaskState::kAssigned) {
        SetState(*t, TaskState::kRunning, "running on " + t->placement->node);
      }
      tasks_.MarkChanged(t->id);
      return Status::Ok();
    }
    return TaskFinished(id, attempt, 0, 0,
                        reason.empty() ? AllRanksExited(ranks, t->spec.tasks_per_node) : reason,
                        cause);
  }
  // One rank failed: the whole gang stops (TaskFinished kills the other ranks) and is
  // retried together.
  const std::string what =
      reason.empty() ? "exited with code " + std::to_string(exit_code) : reason;
  return TaskFinished(id, attempt, exit_code, peak_gpu_mem_mib,
                      "rank " + std::to_string(rank) + " on node " + node + " " + what, cause);
}

void Scheduler::KillGang(const Task& t, const std::string& reason) {
  if (t.gang_placements.empty() || !IsActive(t)) return;
  PushKill(t, "the gang stops: " + reason);
}

// A memory failure proves the task needs more than its share: the retry asks for the share
// grown by memory_retry_growth_percent (at least the observed peak plus the table's
// headroom), capped at the largest GPU in the cluster; the table records the share as a
// lower bound of the profile's peak, so the next task of that profile starts above it.
// Without a retry to come (`retried` false) only the table learns; without `learn` (the
// evidence is the task's word) only the task's own retry grows.
void Scheduler::GrowAfterMemoryFailure(Task& t, MiB peak_gpu_mem_mib, bool retried,
                                       bool learn) {
  const MiB before = t.gpu_mem_need_mib;
  MiB grown = before + (before * config_.memory_retry_growth_percent + 99) / 100;
  const int64_t headroom = config_.memory_table.learned_headroom_percent;
  grown = std::max(grown, peak_gpu_mem_mib + (peak_gpu_mem_mib * headroom + 99) / 100);
  MiB largest = 0;
  for (const NodeState& n : cluster().nodes()) largest = std::max(largest, n.max_gpu_total_mib);
  if (largest > 0) grown = std::min(grown, largest);
  if (t.spec.profile && learn) {
    memory_table_.Observe(*t.spec.profile, std::max(before, peak_gpu_mem_mib));
  }
  if (!retried || grown <= before) return;  // the last failure: the table learns, no retry
  t.gpu_mem_need_mib = grown;
  t.mem_source = "grown";
}

Status Scheduler::Preempt(TaskId id, const std::string& reason) {
  Task* t = Find(id);
  if (t == nullptr) return NotFound("task " + id.ToString() + ": no such task");
  if (!IsActive(*t)) {
    return FailedPrecondition("task " + id.ToString() + " is " + TaskStateName(t->state) +
                              ": only an assigned or running task can be preempted");
  }
  PushKill(*t, reason);
  ++t->preemptions;
  ++stats_.preemptions;
  t->preempted_attempt = t->attempts;
  Requeue(*t, reason);  // releases (attained service kept) and returns it to Q by its order
  return Status::Ok();
}

std::vector<TaskId> Scheduler::PreemptForOrder() {
  const QueueOrderOptions& order = config_.queue_order;
  if (!IsPreemptiveOrder(order.order)) return {};
  const TimeMs now = clock_.NowMs();
  last_order_decision_ms_ = now;
  PromoteStarved();
  int64_t pool = 0;
  std::vector<bool> usable(cluster().size());
  for (size_t i = 0; i < cluster().size(); ++i) {
    usable[i] = cluster().summary(i).schedulable;
    if (usable[i]) pool += cluster().summary(i).gpu_count;
  }
  std::vector<const Task*> live;
  live.reserve(tasks_.active().size() + main_queue_.size());
  for (TaskId id : tasks_.active()) {
    const Task& t = *Find(id);
    if (t.placement && usable[t.placement->node_index]) live.push_back(&t);
  }
  for (const QueueKey& key : main_queue_.Snapshot()) live.push_back(Find(key.id));
  const std::vector<TaskId> victims = SelectPreemptionVictims(order, live, pool, now);
  for (TaskId id : victims) {
    Task& v = *Find(id);
    const std::string reason = std::string("preempted by the queue order (") +
                               QueueOrderName(order.order) + ")";
    const DurationMs grace = v.spec.grace_ms.value_or(config_.preemption_grace_ms);
    PushKill(v, reason, grace);
    ++v.preemptions;
    ++stats_.preemptions;
    ++stats_.order_preemptions;
    v.order_preempted_ms = now;
    v.preempted_attempt = v.attempts;
    Requeue(v, reason, TaskState::kPreempted);  // not a failure, attained service kept
  }
  if (!victims.empty()) pass_requested_ = true;
  return victims;
}

bool Scheduler::MayPreemptByPriority(const Task& t) const {
  if (!config_.priority_preemption || active_priorities_.empty() ||
      *active_priorities_.begin() >= PreemptingPriority(t)) {
    return false;
  }
  // Issue 37: what the order stopped does not stop back within one quantum.
  return !t.order_preempted_ms ||
         clock_.NowMs() - *t.order_preempted_ms >= config_.queue_order.quantum_ms;
}

bool Scheduler::ApplyPreemptedExit(Task& t, int64_t attempt, int exit_code) {
  if (attempt <= 0 || t.preempted_attempt != attempt) return false;
  t.preempted_attempt = 0;
  if (exit_code == 0) {
    ++t.checkpoints;
    ++stats_.checkpoints;
    t.checkpointed_attempt = attempt;
    tasks_.MarkChanged(t.id);
  }
  return true;
}

Status Scheduler::Cancel(TaskId id, const std::string& reason) {
  Task* t = Find(id);
  if (t == nullptr || tasks_.IsHeld(id)) {
    return NotFound("task " + id.ToString() + ": no such task");  // held: not acknowledged yet
  }
  if (IsTerminal(t->state)) {
    return FailedPrecondition(AlreadyEndedMessage(id.value(), t->state));
  }
  if (IsActive(*t)) {
    PushKill(*t, reason);
  }
  ReleasePlacement(*t);
  RemoveFromQueues(*t);
  t->finished_ms = clock_.NowMs();
  t->failure = Failure::kCancelled;
  SetState(*t, TaskState::kCancelled, reason);
  return Status::Ok();
}

Status Scheduler::AssignmentLost(TaskId id, int64_t attempt, const std::string& reason) {
  Task* t = Find(id);
  GS_RETURN_IF_ERROR(CheckAttempt(t, id, attempt));  // active, and this attempt
  KillGang(*t, reason);
  Requeue(*t, reason);
  return Status::Ok();
}

std::vector<TaskId> Scheduler::TasksOnNode(const std::string& node) const {
  auto index = cluster().Find(node);
  if (!index) return {};
  return resources_.TasksOn(*index);
}

// ---------------------------------------------------------------- restart

Status Scheduler::Restore(const Task& task) {
  GS_ASSIGN_OR_RETURN(Task* restored, tasks_.InsertRestored(task));
  Task& t = *restored;
  t.queue = QueueMembership::kNone;
  t.priority = config_.PriorityOf(t.spec.priority_class).value_or(0);
  if (!IsTerminal(t.state)) CountLive(t, +1);
  resources_.Observe(MakeRequest(t).shape);  // a shape seen before the restart
  next_seq_ = std::max(next_seq_, t.seq + 1);
  const std::optional<Placement> stored = t.placement;
  const std::vector<Placement> stored_gang = std::move(t.gang_placements);
  t.placement.reset();
  t.gang_placements.clear();
  if (IsPending(t.state)) {
    PushMain(t);
  } else if (IsActive(t)) {
    std::optional<Placement> p = stored ? resources_.Rebind(*stored) : std::nullopt;
    std::vector<Placement> gang;  // a gang's other ranks: all of them or the task requeues
    for (const Placement& g : stored_gang) {
      std::optional<Placement> r = p ? resources_.Rebind(g) : std::nullopt;
      if (!r || r->node_index == p->node_index) {
        p.reset();
        break;
      }
      gang.push_back(std::move(*r));
    }
    if (p && static_cast<int64_t>(gang.size()) + 1 != t.spec.nodes) p.reset();
    if (!p) {
      SetState(t, TaskState::kPending, "requeued after restart: its placement could not be restored");
      PushMain(t);
      return Status::Ok();
    }
    resources_.Grant(t.id, *p);
    for (const Placement& g : gang) resources_.Grant(t.id, g);
    t.gang_placements = std::move(gang);
    if (t.spec.preemptible) active_priorities_.insert(t.priority);
    tasks_.SetActive(t, true);
    CountUsage(t, *p, +1);
    fair_share_.StartCharging(t.id, TeamOf(t.spec), t.spec.user,
                              static_cast<double>(p->gpus.size() * (1 + t.gang_placements.size())),
                              clock_.NowMs());
    t.placement = std::move(p);
    t.last_heartbeat_ms = clock_.NowMs();
    liveness_.HeardFrom(t.last_heartbeat_ms);
  }
  return Status::Ok();
}

}  // namespace gpusched::core
