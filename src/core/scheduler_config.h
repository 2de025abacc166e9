#pragma once
// Every option of the cluster scheduler in one explicit struct ([choice] points of
// PATENTS.md sections 2, 4 and 6, with the defaults named there). Validate() names the field.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/memory_table.h"
#include "core/fair_share.h"
#include "core/placement.h"
#include "core/queue_order.h"
#include "core/scoring.h"

namespace gpusched::core {

// What happens to a task no node fits in a pass.
enum class CapacityWait {
  // PATENTS.md section 6 default: it goes to FQ (placement_failures++), is demoted and
  // re-queued at the next t2, as CN115981827A claim 3 says.
  kFailureQueue,
  // It stays in Q at its priority and is retried in the next pass (a pass runs on every
  // release, so it starts as soon as capacity frees). Used by the simulator's baselines and
  // by a server configured with `capacity_wait: stay_queued`.
  kStayQueued,
};

struct SchedulerConfig {
  ScoringTable scoring = ScoringTable::Claim5Default();
  PlacementOptions placement;
  GpuMemoryTable::Options memory_table;

  DurationMs t1_ms = 5'000;       // CN115981827A: pass period (passes also run on events)
  DurationMs t2_ms = 30'000;      // CN115981827A: FQ -> Q period, with demotion
  int64_t fail_max = 3;           // CN115981827A claim 3: FAIL_MAX execution failures
  // A task that failed for GPU memory retries with its estimate grown by this much.
  int64_t memory_retry_growth_percent = 50;
  // Passes without a fitting node before a task is given up; default unlimited
  // (PATENTS.md section 6). Set to fail_max for the literal claim.
  int64_t max_placement_failures = std::numeric_limits<int64_t>::max();
  int max_priority_value = 5 + 3;  // demotion cap: lowest band, 5 + FAIL_MAX
  CapacityWait capacity_wait = CapacityWait::kFailureQueue;
  // The order Q is served in; the default is CN115981827A claim 2 (Pt, first submission).
  QueueOrderOptions queue_order;
  // Strict FIFO semantics: a pass stops at the first task that does not fit.
  bool head_of_line_blocking = false;
  // Within a pass, skip the node scan for a request shape that already found no node (capacity
  // only shrinks during a pass, so the result is the same). Off only to measure raw scans.
  bool memoize_failed_shapes = true;
  // Lazy flush of FQ (README.md, "The failure queue at scale"): a task whose Pt is at the cap
  // and whose shape found no node at a flush is parked with the other tasks of its shape; the
  // next flush tries only each shape's first task and, when it does not fit, the rest wait
  // again unvisited (their counters are caught up when read). The same decisions, queue
  // orders and counters as the eager flush. Applies under the default order with no fair
  // share, no quota, no head-of-line blocking, memoize_failed_shapes and unlimited
  // max_placement_failures; off only to compare with the eager flush.
  bool lazy_failure_queue = true;
  // Expected duration of a task that gives none, for its score.
  DurationMs default_duration_ms = 3'600'000;

  DurationMs node_timeout_ms = 10'000;  // CN109992422A T_srv (heartbeats every 2 s)
  // Issue 37: a node silent past node_timeout is unreachable (nothing new goes there) but
  // keeps its tasks; only once silent this long are they failed and re-queued (Slurm's
  // SlurmdTimeout, Kubernetes' eviction timeout). >= node_timeout_ms.
  DurationMs node_lost_after_ms = 300'000;
  DurationMs task_timeout_ms = 30'000;  // CN109992422A T_task (task heartbeats every 5 s)

  // Reject at submission what no registered node could ever fit (PATENTS.md section 6).
  bool reject_infeasible = true;

  // Fair share between teams and between the users of a team (core/fair_share.h). Applies to
  // the default queue order (kPriority) only; the baselines keep their own order.
  FairShareOptions fair_share;
  // Team quotas (core/quota.h): a within-guarantee task no node fits may stop the newest tasks
  // of teams that borrow (requeued, not failures). Off: it waits like any other task.
  bool reclaim_borrowed = true;

  // ---- gangs, reservations and preemption (README.md) ----
  // The first gang (TaskSpec::nodes > 1) in queue order that does not fit reserves nodes for
  // its planned start; other tasks use them only if they end before it (backfill).
  bool gang_reservation = true;
  // Issue 37: the first task in queue order that needs more than one GPU on one node and
  // does not fit reserves GPUs the same way (core/backfill.h), so a stream of small tasks
  // cannot starve it; only tasks whose time limit ends before its planned start backfill.
  bool wide_task_reservation = true;
  // A task without a time limit backfills onto reserved GPUs by its expected duration. Off
  // (Slurm's rule: only an enforced time limit may); the simulator turns it on, its stated
  // durations being the trace's true ones.
  bool backfill_by_expected_duration = false;
  // A gang (or wide task) holding a reservation this long without starting gives it up
  // (TaskSpec overrides).
  DurationMs gang_timeout_ms = 24 * 3'600'000;
  // Priority classes by name; a task names one (TaskSpec::priority_class, "" = the default).
  struct PriorityClass {
    std::string name;
    int64_t value = 0;
  };
  std::vector<PriorityClass> priority_classes = {{"high", 1000}, {"normal", 0}, {"low", -1000}};
  std::string default_priority_class = "normal";
  // A task no node fits may preempt preemptible tasks of lower priority value.
  bool priority_preemption = true;
  // Which classes each team may use (issue 36). A team's highest class is, first found: its
  // quota's max_priority (`quota set --max-priority`), `teams[team]`, `default_max`, the
  // default class. [choice] An ordinary team gets up to the default class ("normal"): what
  // it submits without --priority, and what it could preempt with before (lower classes).
  // With `enforce` off (the simulator; a server without authentication) every class is
  // allowed, as before grants.
  struct PriorityGrants {
    bool enforce = false;
    std::string default_max;                   // "" = default_priority_class
    std::map<std::string, std::string> teams;  // team -> its highest class
  };
  PriorityGrants priority_grants;
  // Grace period a preempted task gets between SIGTERM and SIGKILL (the agent's part).
  DurationMs preemption_grace_ms = 30'000;

  // The value of a class name ("" = the default class); nullopt when unknown.
  std::optional<int64_t> PriorityOf(const std::string& name) const;

  Status Validate() const;
  // Issue 39 (reload): copies from `from` the fields a running scheduler may change
  // (Scheduler::ApplyLiveConfig): t1, t2, node_timeout, node_lost_after, task_timeout,
  // max_placement_failures.
  void TakeLiveFields(const SchedulerConfig& from);
};

}  // namespace gpusched::core
