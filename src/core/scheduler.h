#pragma once
// Scheduler: the cluster scheduler's decision core, driven by events and returning decisions.
// The server (real clock, gRPC, store) and the simulator (simulated clock) both drive this
// one object, so they make the very same decisions.
//
//   events in:  Submit, Cancel, RegisterNode, NodeHeartbeat, SetNodeReachable, Cordon, Drain,
//               TaskStarted, TaskHeartbeat, TaskFinished, Tick (time passes)
//   out:        Actions (assign a task to a node's GPUs, kill a task), changed task ids
//   queries:    GetTask, Tasks, Explain, cluster(), queue sizes, stats
//
// CN115981827A: scoring and Pt at admission (claims 4-6), Q in (Pt, first-submission) order
// (claim 2), FQ with t2 demotion and FAIL_MAX (claims 3, 8), pre-filtering (claim 9).
// CN109992422A: GPU-memory table (claim 1), shared GPUs (claim 2), placement principles
// (claims 3-4), server and task heartbeats and reclaim (claims 5-8).
//
// CN109992422A claims 9-10: this class is the task-management side (admission, the memory
// table, the task table, Q and FQ, the pass planner); it asks the resource-management side
// (ResourceManager: the state table and placement) with a ResourceRequest per task. A pass is
// planned purely (PlanPass: core/pass_planner.h, over a const view of this class), then
// committed (README.md, "Task management and resource management").
//
// Thread-safety: none. The caller serialises all calls (the server holds one mutex).
// No I/O, no threads of its own (an Executor may be lent for parallel filtering), and time
// only from the Clock it is given.

#include <climits>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "core/backfill.h"
#include "core/cluster_state.h"
#include "core/fair_share.h"
#include "core/fair_share_book.h"
#include "core/liveness_rules.h"
#include "core/memory_table.h"
#include "core/placement.h"
#include "core/quota.h"
#include "core/resource_manager.h"
#include "core/scheduler_config.h"
#include "core/task.h"
#include "core/task_queues.h"
#include "core/task_table.h"
#include "core/team_ledger.h"

namespace gpusched::core {

struct Action {
  enum class Kind { kAssign, kKill };
  Kind kind = Kind::kAssign;
  TaskId task;
  std::string node;
  int64_t attempt = 0;
  std::vector<int> gpus;          // kAssign: device indices on the node
  std::vector<MiB> gpu_mem_mib;   // kAssign: memory share on each
  std::string reason;             // kKill: why
  // A gang (TaskSpec::nodes > 1) gets one action per rank: its rank and every rank's node in
  // rank order (rank 0 first, the torchrun master); single-node tasks: rank 0, no nodes.
  int rank = 0;
  std::vector<std::string> gang_nodes;
  // kKill of a preemption victim: SIGTERM, then SIGKILL after this long; -1 = the agent's
  // own kill grace.
  DurationMs grace_ms = -1;
};

// A priority preemption (SchedulerConfig::priority_preemption): who stopped whom.
struct PreemptionRecord {
  TimeMs at_ms = 0;
  TaskId preemptor;
  TaskId victim;
  DurationMs grace_ms = 0;
};

// What an agent reports every heartbeat.
struct NodeHeartbeat {
  std::string node;
  // Free memory per GPU as the device reports it (NVML), -1 where unknown.
  std::vector<MiB> gpu_free_mib;
  // (task, attempt) pairs the agent is running right now.
  std::vector<std::pair<TaskId, int64_t>> running;
  // Per GPU health; empty = not reported (kept as it was). A GPU that turns unhealthy is
  // excluded at once and its tasks are killed and requeued with `error` as the reason.
  struct GpuHealth {
    bool healthy = true;
    std::string error;  // the latest fault ("" = none ever)
  };
  std::vector<GpuHealth> gpu_health;
};

struct Explanation {
  TaskId id;
  TaskState state = TaskState::kPending;
  ClaimStatus claim = ClaimStatus::kWaiting;
  int st = 0, pt = 0;
  int64_t fail_cnt = 0, placement_failures = 0, attempts = 0;
  std::string queue;     // "Q", "FQ" or ""
  std::string summary;   // one line: where it runs or why it waits / failed
  std::string need;      // pending: what it needs against the most free now (explain_need.h)
  PlacementReport last_report;
  // Issue 37: the pass that produced last_report and the summary's reason (0 = none yet),
  // how long ago (ms), and what a pending task waits for now, e.g. "waits for capacity:
  // retried on the next release or within 30s".
  int64_t pass = 0;
  DurationMs pass_age_ms = 0;
  std::string waits_for;
};

// One decision of a pass's plan (Scheduler::PlanPass), in the order the pass made it.
struct PlanStep {
  enum class Kind {
    kAssign,     // the resource side placed the task: `placement`, `report`
    kReclaim,    // stop `victims` (borrowers' newest tasks), then assign as kAssign
    kWait,       // no node now (CN115981827A claim 3: Q or FQ by capacity_wait): `report`,
                 // `reason`
    kQuotaWait,  // over its team's limit: `reason`
    kParkedWait, // the parked tasks of `task`'s shape not placed by this flush pass wait
                 // again, unvisited (lazy flush): `report`, `reason` of the shape
    kPreempt,    // stop `victims` (lower priority, preemptible), then assign as kAssign
  };
  Kind kind = Kind::kWait;
  TaskId task;
  Placement placement;          // kAssign, kReclaim
  PlacementReport report;       // all but kQuotaWait
  std::string reason;           // kWait, kQuotaWait
  std::vector<TaskId> victims;  // kReclaim, kPreempt, in the order they are stopped
  std::vector<Placement> gang;  // kAssign, kReclaim, kPreempt of a gang: ranks 1..nodes-1
};

// What one pass decided, before anything is applied.
struct PassPlan {
  std::vector<PlanStep> steps;
  int64_t decisions = 0;           // placement attempts
  int64_t memo_hits = 0;           // of which answered from the failed-shape memo (no scan)
  int64_t parallel_decisions = 0;  // of which filtered in chunks
  // Of the decisions, those made for a parked group at once (kParkedWait), without a visit.
  int64_t parked_waits = 0;
  // The pass that follows an FQ flush: parked tasks take part and may be parked.
  bool flush_pass = false;
  // Issue 37: a pass that a release of capacity or a change of node facts triggered. The
  // tasks that wait in FQ for capacity (not execution failures) take part, in queue order,
  // without leaving FQ unless placed and without counting a placement failure.
  bool release_pass = false;
  // Teams whose quota class the pass looked up: they appear in team_usage() (zero if idle).
  std::set<std::string> teams_classified;
  // The reservation (wide task or gang) after this pass (nullopt: none); applied by CommitPlan.
  std::optional<Reservation> reservation;
  // Issue 43: the tasks a release pass re-evaluated in FQ that the failed-shape memo answered
  // keep waiting there (Scheduler::RefreshWait) with one of a few shared verdicts, a
  // (task, verdict) pair each instead of a PlanStep with its own copy of the report: with a
  // million tasks waiting, those copies were most of a release pass. Applied after `steps`
  // (a refresh changes no queue, no placement and no other task).
  struct WaitVerdict {
    PlacementReport report;
    std::string reason;
  };
  struct Refresh {
    TaskId task;
    uint32_t verdict;  // index in `verdicts`
  };
  std::vector<WaitVerdict> verdicts;
  std::vector<Refresh> refreshes;
};

struct SchedulerStats {
  int64_t passes = 0;
  int64_t decisions = 0;          // placement attempts (placed or not), memo hits included
  int64_t memo_hits = 0;          // attempts answered from the failed-shape memo: no node scan
  int64_t placed = 0;
  int64_t parallel_decisions = 0;  // attempts whose filter ran in chunks (|M| > N_par)
  int64_t execution_failures = 0;
  int64_t nodes_lost = 0;
  int64_t tasks_reclaimed = 0;
  int64_t preemptions = 0;
  int64_t reclaims = 0;           // tasks stopped so that a team gets its guaranteed GPUs
  // Decisions of the lazy flush made for a parked group at once: those tasks were not
  // visited one by one (decisions - parked_waits were).
  int64_t parked_waits = 0;
  int64_t las_promotions = 0;     // 2D-LAS starvation promotions (PromoteStarved)
  int64_t gangs_placed = 0;       // multi-node tasks placed (all ranks at once)
  int64_t gang_timeouts = 0;      // reservations given up (gang timeout, wide tasks too)
  int64_t priority_preemptions = 0;  // tasks stopped for a higher priority class
  int64_t order_preemptions = 0;     // tasks stopped by a preemptive queue order (issue 37)
  int64_t checkpoints = 0;           // preempted attempts that exited 0 within their grace
};

// How an attempt ended, beyond its exit code.
struct FinishCause {
  // The task wanted more GPU memory than its share (an allocation refused, the watchdog,
  // CUDA out of memory): its retry gets a larger estimate and the table learns that the
  // share was too small (cause-aware retry).
  bool gpu_mem_exceeded = false;
  // The attempt never ran, for a reason no retry can fix (no such program): the task fails
  // at once instead of counting against FAIL_MAX.
  bool permanent = false;
  // When the attempt ended as its node saw it (Unix ms; 0 = now). An exit reported late (the
  // server was down, the agent reconnected) is dated then, not when it arrived, so run time
  // and GPU-hours end there; kept within [the task's latest transition, now].
  TimeMs ended_ms = 0;
  // The report's memory evidence (its peak, gpu_mem_exceeded) may teach the GPU-memory
  // table, which every task of the profile then uses. The server sets false for evidence the
  // task could write (issue 36): the task's own retry still grows, the table learns nothing.
  bool learn_memory = true;
  // The kernel's OOM killer killed a process of the attempt at its memory limit (the agent's
  // cgroup said so): a retry like any failure, Failure::kOutOfMemory if it was the last.
  bool out_of_memory = false;
};

// A running task's use of its GPUs, as its task heartbeat reports it.
struct GpuUsage {
  int util = 0;  // percent
  MiB mem_used_mib = 0;
};

// What a task heartbeat says of the task's executor (CN109992422A claim 7).
struct ExecutorReport {
  ExecutorStatus status = ExecutorStatus::kUnreported;
  std::string detail;  // why it is hung, e.g. "heartbeat file not touched for 1m5s"
};

class Scheduler {
 public:
  // Validates the configuration. `executor` may be null (sequential filtering).
  static StatusOr<std::unique_ptr<Scheduler>> Create(SchedulerConfig config, Clock& clock,
                                                     Executor* executor = nullptr);

  // ---- events ----
  // Validates, estimates GPU memory, scores, enqueues. The spec is unchanged on error and the
  // scheduler's state is untouched.
  // With `hold`, the task is admitted (id, score, Pt, seq) but kept out of Q until Release:
  // the server holds a submission until its record is durable, so nothing acts on a task
  // that could still vanish (Withdraw, when the write failed).
  StatusOr<TaskId> Submit(TaskSpec spec, bool hold = false);
  // REQUIRES: `id` was submitted with hold and not released. Enqueues it.
  Status Release(TaskId id);
  // REQUIRES: `id` is held. Removes every trace of it (its id is not reused).
  Status Withdraw(TaskId id);
  // Drops a terminal task from memory (the server keeps it in its store). Bounded memory:
  // a long-running server forgets finished tasks after a retention. FailedPrecondition for a
  // task that is not terminal.
  Status Forget(TaskId id);
  Status Cancel(TaskId id, const std::string& reason = "cancelled by user");
  Status RegisterNode(const NodeSpec& spec);
  Status HandleNodeHeartbeat(const NodeHeartbeat& hb);
  Status SetNodeReachable(const std::string& node, bool reachable);
  // After a restore the known nodes are unreachable until their agents reconnect. Passes wait
  // until every node of `nodes` is reachable again, or until `until_ms` (a node that does not
  // come back is not waited for longer): otherwise the first agent to reconnect would get a
  // pass that sends every task it cannot take to FQ for t2, while the others reconnect a
  // moment later. Replaces a previous wait.
  void AwaitNodes(std::set<std::string> nodes, TimeMs until_ms);
  Status Cordon(const std::string& node, bool cordoned);
  // Cordons the node and marks it draining. Its running tasks finish there (Slurm's drain),
  // or with `evict` are stopped and sent back to Q, not counted as failures (kubectl's).
  Status Drain(const std::string& node, bool evict);
  // Issue 39 (`gpusched node rm`): forgets the node (a node that registers again under its
  // name is a new one). A node with assigned or running tasks is refused (FailedPrecondition
  // naming them) unless `force`: they are then stopped there (kills) and sent back to Q
  // without counting a failure, like Drain's evict. The restart wait (AwaitNodes) no longer
  // waits for it. Returns the tasks sent back. NotFound naming an unknown node.
  StatusOr<std::vector<TaskId>> RemoveNode(const std::string& node, bool force);
  // Agent reports; a stale attempt number is FailedPrecondition and changes nothing.
  Status TaskStarted(TaskId id, int64_t attempt);
  // A task heartbeat may carry the attempt's GPU use and its executor's status
  // (CN109992422A claim 7): utilisation > 0 restarts its idle clock; one that says the task
  // is hung is recorded but does not count as a sign of life, so a task hung for longer than
  // T_task is reclaimed like a silent one (claim 8).
  Status TaskHeartbeat(TaskId id, int64_t attempt, std::optional<GpuUsage> usage = std::nullopt,
                       ExecutorReport executor = {});
  // Idle allocations: flags every running task that reported its GPU use and has been at 0 %
  // for `idle_after` or longer (Task::idle), clears the flag of the others, and returns the
  // flagged ones. O(tasks that report GPU use).
  std::vector<TaskId> MarkIdle(DurationMs idle_after);
  size_t idle_tasks() const { return idle_tasks_; }  // as of the last MarkIdle
  // Stops an idle task: killed like a cancel, but it ends failed with `reason`, no retry.
  Status StopIdle(TaskId id, const std::string& reason);
  // The task's agent does not run this attempt although it was assigned (the assignment was
  // lost with a connection or a server crash): back to Q without counting a failure, since
  // the task never ran. Stale attempts are FailedPrecondition.
  Status AssignmentLost(TaskId id, int64_t attempt, const std::string& reason);
  // One rank's end, as the agent of `node` reports it: a gang succeeds when every rank
  // exited 0; one failed rank stops the others and fails the attempt (retried together).
  // Other tasks: TaskFinished. FailedPrecondition for a node that holds no rank of it.
  Status RankFinished(TaskId id, int64_t attempt, const std::string& node, int exit_code,
                      MiB peak_gpu_mem_mib = 0, const std::string& reason = "",
                      FinishCause cause = FinishCause());
  // exit_code 0 = success; observed peak GPU memory (MiB, 0 = unknown) teaches the table.
  Status TaskFinished(TaskId id, int64_t attempt, int exit_code, MiB peak_gpu_mem_mib,
                      const std::string& reason = "", FinishCause cause = FinishCause());

  // ---- restart ----
  // Re-admits a task read back from a store after a restart, keeping its id, score, Pt, seq,
  // counters and state, so an acknowledged task is never lost (DESIGN.md "State").
  // REQUIRES: ids arrive in ascending order (gaps allowed: forgotten or withdrawn tasks), before
  // any Submit; nodes the tasks ran on are registered first.
  // Pending tasks go back to Q. Assigned or running tasks get their placement reserved again
  // on the node of the same name, with a fresh task heartbeat, so they keep running while the
  // agent reconnects (an agent that does not is handled by the normal liveness rules). When
  // the node is unknown or the placement no longer fits, the task is requeued without counting
  // a failure. Terminal tasks are kept as they are.
  Status Restore(const Task& task);
  // The next Submit gets an id >= `next` (ids of tasks that were not restored stay unused).
  void ReserveIdsBelow(uint64_t next) { tasks_.ReserveIdsBelow(next); }
  // Suspends an assigned or running task: a kill action is sent, its resources are released,
  // and it returns to Q (not counted as a failure) keeping its attained service, to be
  // resumed by a later pass. For the preemptive orders (core/preemption.h).
  Status Preempt(TaskId id, const std::string& reason = "preempted");
  // 2D-LAS starvation rule (QueueOrder::kTwoDimLas with a promote knob): every task in Q whose
  // promotion is due now (core/queue_order.h PromotionDueMs) returns to LAS queue 0 and is
  // re-keyed; a pass follows. Returns how many. Tick calls it; a no-op under other orders.
  size_t PromoteStarved();
  // Order preemption (issue 37) under a preemptive queue order (srtf, las, dlas;
  // IsPreemptiveOrder): the 2D-LAS promotions due (PromoteStarved), then the live tasks
  // (assigned or running on a schedulable node, and Q) walked as core/preemption.h says over
  // the GPUs of the schedulable nodes, priority classes first and the order inside one
  // class, a run younger than one quantum kept. Each victim is stopped as a priority
  // preemption is: a kill with its grace (its stop signal, then SIGKILL), requeued in state
  // preempted (not a failure, attained service kept), and it may not preempt by priority
  // for one quantum (QueueOrderOptions::quantum_ms). Returns the victims, ascending; empty
  // under the other orders. Tick calls it before each pass (once per instant).
  std::vector<TaskId> PreemptForOrder();
  // ---- quotas and fair share (core/quota.h, core/fair_share.h) ----
  // Sets or replaces a team's quota; a pass follows. Field-named errors.
  Status SetQuota(const TeamQuota& quota);
  // NotFound naming `node` and the registered nodes (the first 20).
  Status UnknownNode(const std::string& node) const;
  // `quota rm`: the team goes back to the implicit quota (guarantee 0, unlimited borrowing).
  void RemoveQuota(const std::string& team);
  const QuotaPolicy& quotas() const { return ledger_.quotas(); }
  // ---- priority grants (SchedulerConfig::priority_grants, issue 36) ----
  // The highest class `team` may use ("" team = "default").
  std::string GrantedClass(const std::string& team) const { return ledger_.GrantedClass(team); }
  // PermissionDenied naming the class and the grant when the spec's class is above its
  // team's grant (and grants are enforced); OK otherwise. REQUIRES: a known class.
  Status CheckPriorityGrant(const TaskSpec& spec) const {
    return ledger_.CheckPriorityGrant(spec);
  }
  // The priority value `t` preempts with: its own, capped at its team's grant now (a grant
  // lowered after admission takes the power to preempt with it).
  int64_t PreemptingPriority(const Task& t) const {
    return ledger_.PreemptingPriority(t.priority, t.spec.team);
  }
  // Every team with a quota or a live task, by name.
  std::map<std::string, TeamStatus> Teams() const;
  // GPUs and memory held per team (assigned or running tasks).
  const std::map<std::string, TeamUsage>& team_usage() const { return ledger_.usage(); }
  // A task's fair-share factor F(team) * F(user) now, computed afresh (not the cached one Q
  // was last ordered by).
  double FairShareOf(const std::string& team, const std::string& user) const {
    return fair_share_.FactorOf(team, user);
  }
  // GPU-ms used per team since this scheduler started (running tasks up to now), undecayed.
  std::map<std::string, double> TeamGpuMs() const { return fair_share_.TeamGpuMs(); }
  const FairShareUsage& fair_share_usage() const { return fair_share_.usage(); }
  // Usage recorded before this scheduler started: `gpus` GPUs for `service_ms`, ending at
  // `at_ms`. The control plane feeds every stored task's record through it at start and at an
  // HA take-over, so fair share does not forget who used the cluster when a server restarts.
  void RestoreUsage(const TaskSpec& spec, int64_t gpus, DurationMs service_ms, TimeMs at_ms) {
    fair_share_.RestoreUsage(TeamOf(spec), spec.user, gpus, service_ms, at_ms);
  }

  // Time passed: liveness rules, FQ -> Q every t2, and a pass when one is due
  // (an event asked for one, or t1 elapsed). Returns the number of tasks placed.
  size_t Tick();
  // One dispatch pass over a snapshot of Q, now: PlanPass, then the plan is applied
  // (reservations, state changes, actions, events). Returns the number of tasks placed.
  size_t Schedule();
  // The pass Schedule() would make now, decided over the queues, the task table and the state
  // table as they are; changes nothing (twice over the same state gives the same plan). The
  // plan's own reservations are made on a copy of the state table, so each decision sees the
  // ones before it (CN109992422A test 6). Schedule() refreshes fair share first (when due).
  // Not to be called concurrently with itself: it plans on buffers the scheduler keeps
  // between passes. PassPlanner(*this).Plan() (core/pass_planner.h).
  PassPlan PlanPass() const;

  // ---- outputs ----
  std::vector<Action> TakeActions();
  // Ids whose record changed since the last call, ascending (what the store must write).
  // A task that waits another pass for the same reason is not included: only its
  // placement_failures counter moved. (Under the eager FQ flush every task that returns to FQ
  // is included; a parked task of the lazy flush is included only when its reason changes.)
  std::vector<TaskId> TakeChangedTasks();

  // ---- queries ----
  // The pointer stays valid until the task is forgotten (Forget) or withdrawn. A parked FQ
  // task's counters are caught up first (lazy flush).
  const Task* GetTask(TaskId id) const;
  std::vector<const Task*> Tasks() const;  // ascending id; the tasks in memory
  size_t task_count() const { return tasks_.size(); }
  bool IsHeld(TaskId id) const { return tasks_.IsHeld(id); }
  // Assigned or running tasks on `node` (empty for an unknown node), ascending id.
  std::vector<TaskId> TasksOnNode(const std::string& node) const;
  uint64_t next_id() const { return tasks_.next_id(); }
  StatusOr<Explanation> Explain(TaskId id) const;
  // CN109992422A claim 10: the request task management sends resource management for a
  // pending task (its GPU memory from admission: the table, an explicit value or whole GPUs).
  // The request points into the task's spec: valid while the task is in memory.
  StatusOr<ResourceRequest> RequestFor(TaskId id) const;
  const ClusterState& cluster() const { return resources_.state(); }
  const ResourceManager& resources() const { return resources_; }
  GpuMemoryTable& memory_table() { return memory_table_; }
  const SchedulerConfig& config() const { return config_; }
  // Issue 39 (`gpusched admin reload`, SIGHUP): takes from `next` the values read afresh at
  // each pass and liveness check: t1, t2, node_timeout, node_lost_after, task_timeout and
  // max_placement_failures; every other field of `next` is ignored. A `next` that does not
  // validate changes nothing (its error). A shorter t1 shortens the wait for the next pass.
  Status ApplyLiveConfig(const SchedulerConfig& next);
  size_t main_queue_size() const { return main_queue_.size(); }
  size_t failure_queue_size() const { return failure_queue_.size() + parked_.size(); }
  // Q in the order the next pass serves it (CN115981827A claim 2), and FQ in failure order.
  std::vector<TaskId> MainQueueOrder() const;
  std::vector<TaskId> FailureQueueOrder() const;
  // When the next Tick() moves FQ back to Q (a simulator schedules its tick then).
  TimeMs next_failure_flush_ms() const { return next_fq_flush_ms_; }
  const SchedulerStats& stats() const { return stats_; }
  // ---- patient node loss (issue 37, README.md "Node loss") ----
  // Why evictions are held ("" = they are not): more than half of the nodes went silent
  // within one node_timeout (Kubernetes' full disruption): a silent node keeps its tasks past
  // node_lost_after until fewer are silent. Recomputed by every Tick.
  const std::string& eviction_hold() const { return liveness_.eviction_hold(); }
  // The scheduler's own wall time (never steps; see clock_): for times handed to it.
  TimeMs NowMs() const { return clock_.NowMs(); }
  // The caller (the server's loop) did not run for `paused` ms (SIGSTOP, a stall): silence
  // it could not hear is not a node's. Every node not yet lost and every active task counts
  // as heard `paused` later (at most now): one heard just before the pause gets a full
  // node_timeout / task_timeout from now to be heard again, one silent before keeps that.
  void ForgiveSilence(DurationMs paused);
  // ---- gangs and priority preemption (README.md) ----
  // The reservation of the first wide task or gang in queue order that does not fit
  // (core/backfill.h); nullopt: none.
  const std::optional<Reservation>& reservation() const { return reservation_; }
  // Every priority preemption so far, oldest first (kept: the last kMaxPreemptionLog).
  const std::deque<PreemptionRecord>& preemption_log() const { return preemption_log_; }
  static constexpr size_t kMaxPreemptionLog = 4096;
  // Accounting invariants: no over-commit, reservations equal the sum of placements, every
  // live task in exactly one place. For tests and debug builds.
  Status CheckInvariants() const;

 private:
  Scheduler(SchedulerConfig config, Clock& clock, Executor* executor);

  Task* Find(TaskId id);
  Status ValidateAndResolve(TaskSpec& spec, Task& task) const;
  Status CheckFeasible(const TaskSpec& spec, const Task& task) const;
  const ClusterState::Extremes& ExtremesFor(const std::string& gpu_model) const;
  // CN109992422A claim 10: the resource request task management sends for `t`.
  ResourceRequest MakeRequest(const Task& t) const;
  QueueKey KeyOf(const Task& t) const;
  void SetState(Task& t, TaskState state, const std::string& reason);
  // The time of what is being applied: FinishCause::ended_ms while an exit is applied, else
  // now. Transitions, finish times and the service a release charges use it.
  TimeMs EventTimeMs() const { return event_time_ms_.value_or(clock_.NowMs()); }
  Status ApplyFinish(Task& t, int exit_code, MiB peak_gpu_mem_mib, const std::string& reason,
                     FinishCause cause);
  void PushMain(Task& t);
  void RemoveFromQueues(Task& t);
  void Commit(Task& t, const Placement& p, std::vector<Placement> gang = {});
  // Kill actions for every rank of an assigned or running task.
  void PushKill(const Task& t, const std::string& reason, DurationMs grace_ms = -1);
  // A gang's attempt ends while some ranks may still run: kill actions for every rank.
  void KillGang(const Task& t, const std::string& reason);
  // The placement of `t`'s rank on the node at `index`, or null.
  static const Placement* PlacementOn(const Task& t, size_t index);
  // Gang timeout: a reservation held too long is given up, with the reason on the task.
  void CheckGangTimeout(TimeMs now);
  void ReleasePlacement(Task& t);
  // REQUIRES: summary == DescribeReport(report) (computed once per request shape and pass).
  void OnCapacityWait(Task& t, PlacementReport report, const std::string& summary);
  // An FQ task that waits for capacity, not placed by a release pass: it stays in FQ with
  // its counters; only its report and reason are refreshed (issue 37).
  // `now_ms`: the pass's time (CommitPlan reads the clock once for all its refreshes).
  void RefreshWait(Task& t, const PlacementReport& report, const std::string& summary,
                   TimeMs now_ms);
  // Q in queue order, and in a release pass also the FQ tasks waiting for capacity that are
  // not parked (parked ones take part through PassPlanner::PlanWithParked).
  std::vector<QueueKey> PassSnapshot(bool release_pass) const;
  // What a pending task waits for now (Explanation::waits_for).
  std::string WaitsFor(const Task& t) const;
  bool WaitsForCapacityInFq(const Task& t) const {
    return t.queue == QueueMembership::kFailure &&
           (fq_capacity_.count(t.id) > 0 || parked_.Find(t.id) != nullptr);
  }
  // `kind`: the task's failure (Task::failure) if this was its last retry.
  void FailExecution(Task& t, const std::string& reason, Failure kind);
  void GrowAfterMemoryFailure(Task& t, MiB peak_gpu_mem_mib, bool retried, bool learn);
  void ApplyGpuHealth(size_t index, const std::vector<NodeHeartbeat::GpuHealth>& health);
  // Fails the task at once, without a retry: no further attempt could succeed (it ran past
  // its time limit, or its program or working directory does not exist).
  void FailPermanently(Task& t, const std::string& reason, Failure kind);
  // Back to Q, not counted as a failure; `state` kPending or kPreempted. A gang's ranks that
  // may still run are killed.
  void Requeue(Task& t, const std::string& reason, TaskState state = TaskState::kPending);
  // The liveness rules' verdicts (LivenessRules) applied: nodes marked unavailable or lost,
  // tasks reclaimed or failed past their time limit.
  void CheckNodeLiveness(TimeMs now);
  // Silent past node_lost_after: lost, its tasks failed for `reason` and re-queued (claim 6).
  void LoseNode(size_t index, const std::string& reason);
  // RemoveNode's renumbering: placements and the reservation past `index` move down by one.
  void ForgetNodeIndex(size_t index);
  void CheckTaskLiveness(TimeMs now);
  void CheckTimeLimits(TimeMs now);
  // The tasks of `ids` (every one in the task table), in order: the rules' view of them.
  std::vector<const Task*> TaskViews(const std::set<TaskId>& ids) const;
  void FlushFailureQueue();
  // AwaitNodes' wait holds at `now`: some awaited node is still unreachable, and the wait has
  // not ended. Forgets the nodes that came back, and the whole wait once it ended.
  bool AwaitingNodes(TimeMs now);
  // ---- the lazy flush (README.md, "The failure queue at scale") ----
  using Shape = RequestShape;
  // A GPU model no node has: matches nothing (the task waits for such a node to join).
  static constexpr int kUnknownModel = INT_MAX;
  Shape ShapeOf(const ResourceRequest& req) const;
  bool LazyFlushActive() const;
  // After a task waited in a flush pass: parks it when its key and shape allow.
  void MaybePark(Task& t);
  void ApplyParkedWait(PlanStep& step);
  // Applies the flush passes a parked task waited through since its record was current.
  // Logically const: what a reader sees is what the eager flush would have written.
  void CatchUp(TaskId id) const;
  void CatchUpAll() const;
  // Every parked task back to the plain FQ, in FQ order (before quotas change the pass).
  void UnparkAll();
  // ---- the pass (scheduler_plan.cc): PassPlanner plans it, CommitPlan applies the plan ----
  friend class PassPlanner;  // reads the queues, tasks, state table, ledger and reservation
  // Applies a plan. REQUIRES: made by PlanPass with no event since.
  size_t CommitPlan(PassPlan plan);
  // CommitPlan's steps: the victims of a reclaim and of a priority preemption stopped and
  // requeued (those no longer active skipped), and `t` assigned as `step` says.
  void StopForReclaim(const Task& t, const std::vector<TaskId>& victims);
  void StopForPriority(const Task& t, const std::vector<TaskId>& victims);
  void ApplyAssign(Task& t, PlanStep& step);
  void QuotaWait(Task& t, const std::string& reason);
  // The task's GPU memory in all: its reservation when placed, else its need.
  MiB TaskGpuMemMib(const Task& t) const;
  // `t`'s GPUs at `p` (and its gang's other ranks) counted (+1) or returned (-1) for its team.
  void CountUsage(const Task& t, const Placement& p, int sign) {
    ledger_.CountUsage(TeamOf(t.spec), p, t.gang_placements, sign);
  }
  bool FairShareActive() const {
    return config_.fair_share.enabled() && config_.queue_order.order == QueueOrder::kPriority;
  }
  // Charges running tasks up to now, recomputes the factors (FairShareBook) and re-keys Q.
  void RecalcFairShare();
  // `t` (admitted or restored, not terminal: +1; ending or withdrawn: -1) in fair share's
  // live groups.
  void CountLive(const Task& t, int delta) {
    fair_share_.CountLive(TeamOf(t.spec), t.spec.user, delta);
  }
  bool IsActive(const Task& t) const {
    return t.state == TaskState::kAssigned || t.state == TaskState::kRunning;
  }
  Status CheckAttempt(const Task* t, TaskId id, int64_t attempt) const;
  // Whether `t` may stop lower priorities in a pass: priority preemption is on, a lower
  // preemptible class runs, and the order did not stop `t` less than a quantum ago.
  bool MayPreemptByPriority(const Task& t) const;
  // The exit of an attempt a preemption stopped (Task::preempted_attempt): exit 0 counts as
  // a checkpoint (Task::checkpoints). Returns whether `attempt` was that attempt.
  bool ApplyPreemptedExit(Task& t, int64_t attempt, int exit_code);
  bool IsLateSuccess(const Task* t, int64_t attempt, int exit_code) const;

  SchedulerConfig config_;
  // Issue 37: wall time that never steps (base/clock.h): every duration the scheduler
  // measures (heartbeat ages, t1, t2, time limits, gang timeouts) is immune to a step of
  // the system clock; its records are the wall time of its start plus the time elapsed.
  SteadyWallClock clock_;
  LivenessRules liveness_;  // reads config_; eviction_hold() and the heartbeat floor
  ResourceManager resources_;  // CN109992422A claims 9-10: the state table and placement
  // The planner's copies of the table (PassPlanner), kept so that each pass reuses their memory.
  mutable ClusterState plan_view_buffer_, plan_blocked_buffer_;
  GpuMemoryTable memory_table_;
  MainQueue main_queue_;
  FailureQueue failure_queue_;
  // Lazy flush: FQ's settled tasks, grouped by shape. Mutable: reads catch up their counters.
  mutable ParkedQueue parked_;
  int64_t flush_rounds_ = 0;        // flush passes committed
  bool flush_pass_due_ = false;     // a flush happened; its pass has not run yet
  // Issue 37: FQ tasks (not parked) that wait for capacity, put there by OnCapacityWait; the
  // others in FQ wait for t2 after an execution failure. Parked tasks all wait for capacity.
  // Unordered: only looked up, and listed by PassSnapshot, which sorts them by their keys.
  std::unordered_set<TaskId> fq_capacity_;
  // Capacity was released or node facts changed since the last pass: the next pass is a
  // release pass (PassPlan::release_pass).
  bool capacity_event_ = false;
  uint64_t flush_block_end_ = 0;    // FQ positions below this failed in the latest flush pass

  // Every task in memory, by id, with the held, active and time-limited sets and the ids
  // changed since TakeChangedTasks. Terminal tasks leave through Forget; a held submission
  // (see Submit) is held there and in no queue.
  TaskTable tasks_;
  std::set<TaskId> gpu_reporting_;  // tasks whose heartbeats carried GPU use (MarkIdle)
  size_t idle_tasks_ = 0;
  std::vector<Action> actions_;

  TeamLedger ledger_;         // quotas, usage and grants per team
  FairShareBook fair_share_;  // after ledger_ and clock_, which it reads

  std::optional<Reservation> reservation_;
  std::multiset<int64_t> active_priorities_;  // of the active preemptible tasks
  std::deque<PreemptionRecord> preemption_log_;

  uint64_t next_seq_ = 1;
  TimeMs next_pass_ms_ = 0;
  std::set<std::string> awaited_nodes_;  // AwaitNodes: passes wait for them
  TimeMs await_until_ms_ = 0;
  TimeMs next_fq_flush_ms_ = 0;
  std::optional<TimeMs> event_time_ms_;  // see EventTimeMs; set inside TaskFinished only
  bool pass_requested_ = false;
  TimeMs last_order_decision_ms_ = -1;  // PreemptForOrder's latest instant
  SchedulerStats stats_;
};

}  // namespace gpusched::core
