#include "core/scheduler.h"

#include <algorithm>
#include <climits>
#include <tuple>

#include "base/check.h"
#include "core/explain_need.h"
#include "core/task_validation.h"

namespace gpusched::core {

const char* TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kPending: return "pending";
    case TaskState::kPreempted: return "preempted";
    case TaskState::kAssigned: return "assigned";
    case TaskState::kRunning: return "running";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string AlreadyEndedMessage(uint64_t id, TaskState s) {
  const std::string task = "task " + std::to_string(id);
  if (s == TaskState::kCancelled) return task + " was already cancelled";
  return task + " has already " + TaskStateName(s);
}

const char* FailureName(Failure f) {
  switch (f) {
    case Failure::kNone: return "";
    case Failure::kExit: return "exit";
    case Failure::kTimeout: return "timeout";
    case Failure::kOutOfMemory: return "out_of_memory";
    case Failure::kNodeLost: return "node_lost";
    case Failure::kLaunch: return "launch";
    case Failure::kCancelled: return "cancelled";
    case Failure::kPreempted: return "preempted";
    case Failure::kIdle: return "idle";
    case Failure::kHung: return "hung";
    case Failure::kUnschedulable: return "unschedulable";
  }
  return "";
}

std::optional<Failure> FailureFromName(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(Failure::kUnschedulable); ++i) {
    if (name == FailureName(static_cast<Failure>(i))) return static_cast<Failure>(i);
  }
  return std::nullopt;
}

const char* ExecutorStatusName(ExecutorStatus s) {
  switch (s) {
    case ExecutorStatus::kUnreported: return "";
    case ExecutorStatus::kRunning: return "running";
    case ExecutorStatus::kStopped: return "stopped";
    case ExecutorStatus::kHeartbeatStale: return "heartbeat-stale";
  }
  return "";
}

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(SchedulerConfig config, Clock& clock,
                                                       Executor* executor) {
  GS_RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(config), clock, executor));
}

Scheduler::Scheduler(SchedulerConfig config, Clock& clock, Executor* executor)
    : config_(std::move(config)),
      clock_(clock),
      liveness_(config_),
      resources_(config_.placement, executor),
      memory_table_(config_.memory_table),
      ledger_(config_),
      fair_share_(config_.fair_share, ledger_.quotas(), clock_) {
  const TimeMs now = clock_.NowMs();
  next_pass_ms_ = now + config_.t1_ms;
  next_fq_flush_ms_ = now + config_.t2_ms;
}

// Raw: a parked task's record is caught up by RemoveFromQueues before anything changes it.
Task* Scheduler::Find(TaskId id) { return tasks_.Find(id); }

const Task* Scheduler::GetTask(TaskId id) const {
  if (!parked_.empty()) CatchUp(id);
  return tasks_.Find(id);
}

std::vector<const Task*> Scheduler::Tasks() const {
  CatchUpAll();
  std::vector<const Task*> out;
  out.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_.records()) out.push_back(&t);
  return out;
}

// ---------------------------------------------------------------- admission

Status Scheduler::ValidateAndResolve(TaskSpec& spec, Task& task) const {
  GS_RETURN_IF_ERROR(ValidateTaskSpec(spec));
  // "--gpu-mem 6GiB" or "--profile resnet50" alone: one share of one GPU.
  if (spec.gpus == 0 && (spec.gpu_mem_mib > 0 || spec.profile)) spec.gpus = 1;
  task.exclusive = false;
  if (spec.gpus == 0) {
    task.gpu_mem_need_mib = 0;
    task.mem_source = "none";
  } else if (spec.gpu_mem_mib > 0) {
    task.gpu_mem_need_mib = spec.gpu_mem_mib;  // an explicit value always wins
    task.mem_source = "explicit";
  } else if (spec.profile) {
    GS_ASSIGN_OR_RETURN(MemoryEstimate est, memory_table_.Estimate(*spec.profile));
    task.gpu_mem_need_mib = est.mib;
    task.mem_source = est.source;
  } else {
    task.exclusive = true;
    task.mem_source = "whole-gpu";
  }
  if (!spec.gpu_model.empty() && cluster().size() > 0 && cluster().ModelId(spec.gpu_model) < 0 &&
      !spec.keep_pending_if_infeasible) {
    std::string known;
    for (const std::string& m : cluster().models()) known += (known.empty() ? "" : ", ") + m;
    return InvalidArgument("gpu_model: unknown GPU model \"" + spec.gpu_model +
                           "\" (the cluster has: " + known +
                           "; submit with --keep-pending (YAML keep_pending: true) to wait for such a node)");
  }
  const std::optional<int64_t> priority = config_.PriorityOf(spec.priority_class);
  if (!priority) {
    std::string known;
    for (const auto& c : config_.priority_classes) known += (known.empty() ? "" : ", ") + c.name;
    return InvalidArgument("priority: unknown class \"" + spec.priority_class +  // --priority
                           "\" (known: " + known + ")");
  }
  task.priority = *priority;
  GS_RETURN_IF_ERROR(CheckPriorityGrant(spec));
  return CheckFeasible(spec, task);
}

const ClusterState::Extremes& Scheduler::ExtremesFor(const std::string& gpu_model) const {
  return resources_.Extremes(gpu_model.empty() ? -1 : cluster().ModelId(gpu_model));
}

Status Scheduler::CheckFeasible(const TaskSpec& spec, const Task& task) const {
  if (!config_.reject_infeasible || spec.keep_pending_if_infeasible || cluster().size() == 0) {
    return Status::Ok();
  }
  const int model = spec.gpu_model.empty() ? -1 : cluster().ModelId(spec.gpu_model);
  const ClusterState::Extremes& e = ExtremesFor(spec.gpu_model);
  const std::string hint = " (submit with --keep-pending, or keep_pending: true in YAML, to wait for a bigger node)";
  if (spec.gpus > e.max_gpus) {
    return ResourceExhausted("gpus: " + std::to_string(spec.gpus) +
                             " requested but the largest node has " + std::to_string(e.max_gpus) +
                             (model >= 0 ? " GPUs of model " + spec.gpu_model : " GPUs") + hint);
  }
  if (!task.exclusive && task.gpu_mem_need_mib > e.max_gpu_mib) {
    return ResourceExhausted("gpu_mem: " + FormatSizeMiB(task.gpu_mem_need_mib) +
                             " per GPU requested but the largest GPU has " +
                             FormatSizeMiB(e.max_gpu_mib) + hint);
  }
  if (spec.resources.cpu_milli > e.max_capacity.cpu_milli) {
    return ResourceExhausted("cpu: " + std::to_string(spec.resources.cpu_milli) +
                             "m requested but the largest node has " +
                             std::to_string(e.max_capacity.cpu_milli) + "m" + hint);
  }
  if (spec.resources.mem_mib > e.max_capacity.mem_mib) {
    return ResourceExhausted("mem: " + FormatSizeMiB(spec.resources.mem_mib) +
                             " requested but the largest node has " +
                             FormatSizeMiB(e.max_capacity.mem_mib) + hint);
  }
  if (spec.nodes > 1) {
    // A gang needs that many distinct nodes each able to hold one rank when empty.
    int64_t able = 0;
    for (const NodeState& n : cluster().nodes()) {
      if (static_cast<int64_t>(n.gpus.size()) < spec.gpus) continue;
      if (n.capacity.cpu_milli < spec.resources.cpu_milli) continue;
      if (n.capacity.mem_mib < spec.resources.mem_mib) continue;
      int64_t gpus = 0;
      for (const GpuState& g : n.gpus) {
        const bool fits = task.exclusive || g.total_mib >= task.gpu_mem_need_mib;
        if ((model < 0 || g.model_id == model) && fits) ++gpus;
      }
      if (gpus >= spec.gpus) ++able;
    }
    if (able < spec.nodes) {
      return ResourceExhausted("nodes: " + std::to_string(spec.nodes) + " nodes x " +
                               std::to_string(spec.gpus) + " GPUs requested but only " +
                               std::to_string(able) + " nodes could hold one rank" + hint);
    }
  }
  return Status::Ok();
}

StatusOr<TaskId> Scheduler::Submit(TaskSpec spec, bool hold) {
  Task task;
  GS_RETURN_IF_ERROR(ValidateAndResolve(spec, task));

  // CN115981827A claims 4-6: score the task from CPU, GPU memory, RAM and duration.
  MiB gpu_total = TotalGpus(spec) * task.gpu_mem_need_mib;
  if (task.exclusive) {
    const MiB largest = ExtremesFor(spec.gpu_model).max_gpu_mib;
    gpu_total = TotalGpus(spec) * (largest > 0 ? largest : INT32_MAX);
  }
  const TaskScore score =
      ScoreTask(config_.scoring, spec.resources.cpu_milli, gpu_total, spec.resources.mem_mib,
                spec.duration_ms.value_or(config_.default_duration_ms));

  const TimeMs now = clock_.NowMs();
  task.id = tasks_.TakeId();
  task.spec = std::move(spec);
  task.st = score.st;
  task.base_pt = task.pt = score.pt;
  task.seq = next_seq_++;
  task.submitted_ms = now;
  task.claim = ClaimStatus::kWaiting;  // claim 7: status 2 on arrival
  const TaskId id = task.id;
  Task& t = tasks_.Insert(std::move(task));
  CountLive(t, +1);
  resources_.Observe(MakeRequest(t).shape);  // the workload of the min_fragmentation orders
  SetState(t, TaskState::kPending, "submitted");
  if (hold) {
    tasks_.Hold(id);
  } else {
    PushMain(t);
  }
  return id;
}

Status Scheduler::Release(TaskId id) {
  if (!tasks_.Unhold(id)) return FailedPrecondition("task " + id.ToString() + ": not held");
  PushMain(*Find(id));
  return Status::Ok();
}

Status Scheduler::Withdraw(TaskId id) {
  if (!tasks_.Unhold(id)) return FailedPrecondition("task " + id.ToString() + ": not held");
  CountLive(*Find(id), -1);
  tasks_.Erase(id);  // TakeChangedTasks does not report it
  return Status::Ok();
}

Status Scheduler::Forget(TaskId id) {
  const Task* t = GetTask(id);
  if (t == nullptr) return NotFound("task " + id.ToString() + ": no such task");
  if (!IsTerminal(t->state)) {
    return FailedPrecondition("task " + id.ToString() + ": only a terminal task can be forgotten");
  }
  tasks_.Erase(id);  // TakeChangedTasks does not report it
  return Status::Ok();
}

// ---------------------------------------------------------------- state helpers

void Scheduler::SetState(Task& t, TaskState state, const std::string& reason) {
  if (!IsTerminal(t.state) && IsTerminal(state)) CountLive(t, -1);
  t.state = state;
  t.reason = reason;
  // Bounded history: the first transition (submitted) and the latest ones. A task retried
  // thousands of times would otherwise grow its record, and every write of it, forever.
  if (t.history.size() >= kMaxHistory) {
    t.history.erase(t.history.begin() + 1, t.history.end() - (kMaxHistory - 2));
  }
  t.history.push_back({EventTimeMs(), state, reason});
  tasks_.MarkChanged(t.id);
}

// The key is a function of fields that do not change while the task is in Q (Pt, seq and
// the attained service of past runs), so the same key finds it again.
// Under fair share the rank is the one stored when the task entered Q (RecalcFairShare
// re-keys Q when the factors change).
QueueKey Scheduler::KeyOf(const Task& t) const {
  QueueKey key = MakeQueueKey(config_.queue_order, t, t.attained_ms);
  if (FairShareActive()) key.rank = t.fs_rank;
  return key;
}

void Scheduler::PushMain(Task& t) {
  if (FairShareActive()) {
    t.fs_rank = FairShareRank(config_.fair_share, t.pt, config_.max_priority_value,
                              fair_share_.CachedFactor(TeamOf(t.spec), t.spec.user));
  }
  t.queue = QueueMembership::kMain;
  t.claim = ClaimStatus::kWaiting;
  main_queue_.Push(KeyOf(t));
  pass_requested_ = true;
}

void Scheduler::RemoveFromQueues(Task& t) {
  if (t.queue == QueueMembership::kMain) main_queue_.Erase(KeyOf(t));
  if (t.queue == QueueMembership::kFailure && !failure_queue_.Erase(t.id)) {
    CatchUp(t.id);
    parked_.Erase(t.id);
  }
  fq_capacity_.erase(t.id);
  t.queue = QueueMembership::kNone;
}

void Scheduler::Commit(Task& t, const Placement& p, std::vector<Placement> gang) {
  RemoveFromQueues(t);
  resources_.Grant(t.id, p);  // visible to the very next decision (CN109992422A test 6)
  for (const Placement& g : gang) resources_.Grant(t.id, g);
  tasks_.SetActive(t, true);
  t.placement = p;
  t.gang_placements = std::move(gang);
  t.ranks_done.clear();
  if (t.spec.preemptible) active_priorities_.insert(t.priority);
  if (t.spec.nodes > 1) ++stats_.gangs_placed;
  if (reservation_ && reservation_->task == t.id) reservation_.reset();
  t.claim = ClaimStatus::kWaiting;  // claim 7: 2 until it ends (0 only on success)
  ++t.attempts;
  t.attempt_nodes[t.attempts] = p.node;
  if (t.attempt_nodes.size() > kMaxHistory) t.attempt_nodes.erase(t.attempt_nodes.begin());
  const TimeMs now = clock_.NowMs();
  CountUsage(t, p, +1);
  fair_share_.StartCharging(t.id, TeamOf(t.spec), t.spec.user,
                            static_cast<double>(p.gpus.size() * (1 + t.gang_placements.size())),
                            now);
  t.assigned_ms = now;
  t.last_heartbeat_ms = now;
  liveness_.HeardFrom(now);
  if (t.gang_placements.empty()) {
    SetState(t, TaskState::kAssigned, "assigned to " + p.node);
  } else {
    std::string nodes = p.node;
    for (const Placement& g : t.gang_placements) nodes += "," + g.node;
    SetState(t, TaskState::kAssigned, "assigned to " + nodes);
  }
  const int ranks = 1 + static_cast<int>(t.gang_placements.size());
  std::vector<std::string> gang_nodes;
  if (ranks > 1) {
    gang_nodes.push_back(p.node);
    for (const Placement& g : t.gang_placements) gang_nodes.push_back(g.node);
  }
  for (int rank = 0; rank < ranks; ++rank) {
    const Placement& at = rank == 0 ? p : t.gang_placements[rank - 1];
    Action a;
    a.kind = Action::Kind::kAssign;
    a.task = t.id;
    a.node = at.node;
    a.attempt = t.attempts;
    a.gpus = at.gpus;
    a.gpu_mem_mib = at.gpu_mem_mib;
    a.rank = rank;
    a.gang_nodes = gang_nodes;
    actions_.push_back(std::move(a));
  }
  ++stats_.placed;
}

void Scheduler::PushKill(const Task& t, const std::string& reason, DurationMs grace_ms) {
  for (size_t rank = 0; rank <= t.gang_placements.size(); ++rank) {
    const Placement& at = rank == 0 ? *t.placement : t.gang_placements[rank - 1];
    Action a;
    a.kind = Action::Kind::kKill;
    a.task = t.id;
    a.node = at.node;
    a.attempt = t.attempts;
    a.reason = reason;
    a.rank = static_cast<int>(rank);
    a.grace_ms = grace_ms;
    actions_.push_back(std::move(a));
  }
}

const Placement* Scheduler::PlacementOn(const Task& t, size_t index) {
  if (!t.placement) return nullptr;
  if (t.placement->node_index == index) return &*t.placement;
  for (const Placement& g : t.gang_placements) {
    if (g.node_index == index) return &g;
  }
  return nullptr;
}

void Scheduler::ReleasePlacement(Task& t) {
  if (!t.placement) return;
  const TimeMs at = EventTimeMs();
  t.attained_ms += std::max<DurationMs>(0, at - t.assigned_ms);
  t.released_ms = at;
  fair_share_.StopCharging(t.id, at);
  CountUsage(t, *t.placement, -1);
  resources_.Return(t.id, *t.placement);
  for (const Placement& g : t.gang_placements) resources_.Return(t.id, g);
  if (t.spec.preemptible) active_priorities_.erase(active_priorities_.find(t.priority));
  tasks_.SetActive(t, false);
  t.placement.reset();
  t.gang_placements.clear();
  pass_requested_ = true;  // capacity was freed: the tasks waiting for it take part (issue 37)
  capacity_event_ = true;
}

void Scheduler::OnCapacityWait(Task& t, PlacementReport report, const std::string& summary) {
  ++t.placement_failures;
  t.last_report = std::move(report);
  t.report_pass = stats_.passes;
  t.report_ms = clock_.NowMs();
  // Only the counter moved when the task waits for the same reason as last pass: not a
  // change worth writing (see TakeChangedTasks), so a pass over a long Q reports nothing.
  if (t.last_report_summary != summary || t.reason != summary) {
    t.last_report_summary = summary;
    tasks_.MarkChanged(t.id);
  }
  if (t.placement_failures >= config_.max_placement_failures) {
    RemoveFromQueues(t);
    t.claim = ClaimStatus::kFailed;
    t.failure = Failure::kUnschedulable;
    SetState(t, TaskState::kFailed,
             "gave up after " + std::to_string(t.placement_failures) +
                 " passes without a fitting node: " + t.last_report_summary);
    return;
  }
  t.reason = t.last_report_summary;
  if (config_.capacity_wait == CapacityWait::kFailureQueue) {
    // CN115981827A claim 3: scheduling failed -> status 1 -> FQ until the next t2.
    RemoveFromQueues(t);
    t.claim = ClaimStatus::kFailed;
    t.queue = QueueMembership::kFailure;
    failure_queue_.Push(t.id);
    fq_capacity_.insert(t.id);  // a release re-evaluates it before t2 (issue 37)
    tasks_.MarkChanged(t.id);
  }
}

void Scheduler::RefreshWait(Task& t, const PlacementReport& report, const std::string& summary,
                            TimeMs now_ms) {
  t.last_report = report;  // assigned in place: the report's strings keep their memory
  t.report_pass = stats_.passes;
  t.report_ms = now_ms;
  if (t.last_report_summary != summary || t.reason != summary) {
    t.last_report_summary = summary;
    t.reason = summary;
    tasks_.MarkChanged(t.id);
  }
}

// CN115981827A claim 3: an execution failure counts against FAIL_MAX; the task goes to FQ
// while fail_cnt <= FAIL_MAX, else it is given up with its reason (never silently lost).
void Scheduler::FailExecution(Task& t, const std::string& reason, Failure kind) {
  const int64_t limit = t.spec.max_retries.value_or(config_.fail_max);
  if (t.fail_cnt + 1 > limit) {
    const int64_t runs = t.fail_cnt + 1;
    FailPermanently(t,
                    reason + " (failed " + std::to_string(runs) + (runs == 1 ? " time" : " times") +
                        ", " + std::to_string(limit) + (limit == 1 ? " retry" : " retries") +
                        " allowed)",
                    kind);
    return;
  }
  ReleasePlacement(t);
  RemoveFromQueues(t);
  ++t.fail_cnt;
  ++stats_.execution_failures;
  t.claim = ClaimStatus::kFailed;
  // Words for users (issue 41): the patent's FQ is the retry queue, released every t2.
  SetState(t, TaskState::kPending,
           reason + "; retry " + std::to_string(t.fail_cnt) + " of " + std::to_string(limit) +
               " from the retry queue within " + FormatDurationMs(config_.t2_ms));
  t.queue = QueueMembership::kFailure;
  failure_queue_.Push(t.id);
}

void Scheduler::FailPermanently(Task& t, const std::string& reason, Failure kind) {
  ReleasePlacement(t);
  RemoveFromQueues(t);
  ++t.fail_cnt;
  ++stats_.execution_failures;
  t.claim = ClaimStatus::kFailed;
  t.failure = kind;
  t.finished_ms = EventTimeMs();
  SetState(t, TaskState::kFailed, reason);
}

// Back to Q at its current priority without counting a failure (drain, lost assignment).
void Scheduler::CheckGangTimeout(TimeMs now) {
  if (!reservation_) return;
  Task* t = Find(reservation_->task);
  if (t == nullptr || !IsPending(t->state)) {
    reservation_.reset();
    return;
  }
  const DurationMs timeout = t->spec.gang_timeout_ms.value_or(config_.gang_timeout_ms);
  if (now - reservation_->since_ms < timeout) return;
  // Give the GPUs back and let the next wide task or gang in queue order reserve a while.
  t->gang_reserve_after_ms = now + timeout;
  const std::string held = t->spec.nodes > 1
                               ? std::to_string(reservation_->nodes.size()) + " nodes"
                               : std::to_string(reservation_->gpus()) + " GPUs";
  t->reason = std::string(t->spec.nodes > 1 ? "gang" : "reservation") +
              " timeout: could not start within " + FormatDurationMs(timeout) +
              " of reserving " + held + "; released them, waits without a reservation";
  t->last_report_summary = t->reason;
  tasks_.MarkChanged(t->id);
  reservation_.reset();
  ++stats_.gang_timeouts;
  pass_requested_ = true;
  capacity_event_ = true;  // the reserved nodes are open to every task again
}

void Scheduler::Requeue(Task& t, const std::string& reason, TaskState state) {
  ReleasePlacement(t);
  RemoveFromQueues(t);
  SetState(t, state, reason);
  PushMain(t);
}

size_t Scheduler::PromoteStarved() {
  const QueueOrderOptions& order = config_.queue_order;
  if (order.order != QueueOrder::kTwoDimLas || order.dlas_promote_knob <= 0) return 0;
  const TimeMs now = clock_.NowMs();
  size_t promoted = 0;
  for (const QueueKey& key : main_queue_.Snapshot()) {
    Task& t = *Find(key.id);
    const std::optional<TimeMs> due = PromotionDueMs(order, t);
    if (!due || now < *due) continue;
    main_queue_.Erase(key);
    t.las_base_ms = t.attained_ms;
    main_queue_.Push(KeyOf(t));
    ++promoted;
  }
  if (promoted > 0) pass_requested_ = true;
  stats_.las_promotions += static_cast<int64_t>(promoted);
  return promoted;
}

// ---------------------------------------------------------------- passes

// CN109992422A claims 9-10: task management turns a task into the request resource management
// answers; the GPU memory per GPU is the need admission took from the memory table.
ResourceRequest Scheduler::MakeRequest(const Task& t) const {
  ResourceRequest req;
  req.task = t.id;
  PlacementRequest& r = req.shape;
  r.gpus = t.spec.gpus;
  r.gpu_mem_mib = t.gpu_mem_need_mib;
  r.exclusive = t.exclusive;
  if (!t.spec.gpu_model.empty()) {
    const int id = cluster().ModelId(t.spec.gpu_model);
    r.model_id = id >= 0 ? id : kUnknownModel;
  }
  r.resources = t.spec.resources;
  r.node_selector = &t.spec.node_selector;
  r.tolerations = &t.spec.tolerations;
  req.nodes = t.spec.nodes;
  return req;
}

size_t Scheduler::Tick() {
  const TimeMs now = clock_.NowMs();
  CheckNodeLiveness(now);
  CheckTaskLiveness(now);
  CheckTimeLimits(now);
  CheckGangTimeout(now);
  if (now >= next_fq_flush_ms_) {
    FlushFailureQueue();
    next_fq_flush_ms_ = now + config_.t2_ms;
  }
  PromoteStarved();
  if (pass_requested_ || now >= next_pass_ms_) {
    // Issue 37: a preemptive order re-decides the running tasks before each pass.
    if (last_order_decision_ms_ != now) PreemptForOrder();
    return Schedule();
  }
  return 0;
}

// ---------------------------------------------------------------- outputs and queries

std::vector<Action> Scheduler::TakeActions() {
  std::vector<Action> out;
  out.swap(actions_);
  return out;
}

std::vector<TaskId> Scheduler::TakeChangedTasks() { return tasks_.TakeChanged(); }

std::vector<TaskId> Scheduler::MainQueueOrder() const {
  std::vector<TaskId> out;
  for (const QueueKey& k : main_queue_.Snapshot()) out.push_back(k.id);
  return out;
}

StatusOr<ResourceRequest> Scheduler::RequestFor(TaskId id) const {
  const Task* t = GetTask(id);
  if (t == nullptr) return NotFound("task " + id.ToString() + ": no such task");
  if (!IsPending(t->state)) {
    return FailedPrecondition("task " + id.ToString() + " is " + TaskStateName(t->state) +
                              ": only a pending task asks for resources");
  }
  return MakeRequest(*t);
}

Status Scheduler::CheckInvariants() const {
  GS_RETURN_IF_ERROR(cluster().CheckInvariants());
  // Recompute every reservation from the tasks and compare with the state table.
  std::vector<Resources> res(cluster().size());
  std::vector<std::vector<MiB>> gpu(cluster().size());
  for (size_t i = 0; i < cluster().size(); ++i) gpu[i].assign(cluster().node(i).gpus.size(), 0);
  size_t in_main = 0, in_failure = 0;
  for (const auto& [raw_id, t] : tasks_.records()) {
    const std::string who = "task " + t.id.ToString() + ": ";
    if (IsActive(t) != t.placement.has_value()) return Internal(who + "placement/state mismatch");
    if (IsActive(t) != tasks_.active().contains(t.id)) return Internal(who + "active set mismatch");
    if (IsPending(t.state) && t.queue == QueueMembership::kNone &&
        !tasks_.IsHeld(t.id)) {
      return Internal(who + "pending but in no queue");
    }
    if (!IsPending(t.state) && t.queue != QueueMembership::kNone) {
      return Internal(who + "not pending but queued");
    }
    in_main += t.queue == QueueMembership::kMain;
    in_failure += t.queue == QueueMembership::kFailure;
    if (!t.placement) {
      if (!t.gang_placements.empty()) return Internal(who + "gang ranks without a placement");
      continue;
    }
    if (static_cast<int64_t>(t.gang_placements.size()) + 1 != t.spec.nodes) {
      return Internal(who + "a partial gang: " + std::to_string(t.gang_placements.size() + 1) +
                      " of " + std::to_string(t.spec.nodes) + " nodes");
    }
    std::set<size_t> gang_nodes;
    for (size_t rank = 0; rank <= t.gang_placements.size(); ++rank) {
      const Placement& p = rank == 0 ? *t.placement : t.gang_placements[rank - 1];
      if (!gang_nodes.insert(p.node_index).second) return Internal(who + "two ranks on one node");
      res[p.node_index] += p.resources;
      for (size_t k = 0; k < p.gpus.size(); ++k) gpu[p.node_index][p.gpus[k]] += p.gpu_mem_mib[k];
      if (std::set<int>(p.gpus.begin(), p.gpus.end()).size() != p.gpus.size()) {
        return Internal(who + "the same GPU twice");
      }
    }
  }
  if (in_main != main_queue_.size() || in_failure != failure_queue_.size() + parked_.size()) {
    return Internal("queue sizes do not match task records");
  }
  for (const auto& [id, e] : parked_.entries()) {
    const Task& t = tasks_.At(id);
    if (t.queue != QueueMembership::kFailure || e.key != KeyOf(t)) {
      return Internal("task " + id.ToString() + ": parked but not in FQ under its key");
    }
  }
  for (size_t i = 0; i < cluster().size(); ++i) {
    const NodeState& n = cluster().node(i);
    if (!(res[i] == n.allocated)) return Internal("node " + n.name + ": CPU/RAM accounting drift");
    for (size_t g = 0; g < n.gpus.size(); ++g) {
      if (gpu[i][g] != n.gpus[g].allocated_mib) {
        return Internal("node " + n.name + ": GPU " + std::to_string(g) + " accounting drift");
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpusched::core
