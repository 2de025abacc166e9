#pragma once
// The task model: what a user asks for (TaskSpec), where it was placed (Placement) and
// everything the scheduler tracks about it (Task).

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/units.h"
#include "core/node.h"
#include "core/placement_report.h"
#include "core/resources.h"

namespace gpusched::core {

// The inputs of the GPU-memory table (CN109992422A claim 1): what the task is, so its GPU
// memory can be estimated when the user gives no number.
struct MemoryProfile {
  std::string task_type;  // e.g. "classify"
  std::string model;      // e.g. "resnet50"
  int64_t batch = 1;
  int64_t height = 0;     // input size in pixels; 0 = the model's reference size
  int64_t width = 0;
  auto operator<=>(const MemoryProfile&) const = default;
};

// A job array's tasks (`gpusched submit --array A-B`): at most this many in one request, each
// with its index in this environment variable.
inline constexpr int64_t kMaxArrayTasks = 10'000;
inline constexpr std::string_view kArrayIndexEnv = "GPUSCHED_ARRAY_INDEX";

// A task's place in its job array (issue 41): its index and the array's index range. Set by
// the server when it expands the array, never taken from a request. The array's tasks have
// consecutive ids in index order, so the array's id (its first task's id) is
// `id - (index - first)`; `gpusched cancel 12.*` names every task of array 12.
struct ArrayMember {
  int64_t index = 0;
  int64_t first = 0;
  int64_t last = 0;
  auto operator<=>(const ArrayMember&) const = default;
};

struct TaskSpec {
  std::string name;
  // Number of GPUs. 0 with gpu_mem_mib > 0 means one shared GPU.
  int64_t gpus = 0;
  // GPU memory per GPU. 0 with gpus > 0 means whole GPUs, held exclusively.
  MiB gpu_mem_mib = 0;
  // Used to estimate gpu_mem_mib from the memory table when gpu_mem_mib is 0 and gpus > 0.
  std::optional<MemoryProfile> profile;
  std::string gpu_model;  // required GPU model, empty = any
  Resources resources;    // CPU and RAM
  // Expected run time, for the CN115981827A score; absent = SchedulerConfig::default_duration.
  std::optional<DurationMs> duration_ms;
  // Execution failures tolerated before the task is given up; absent = FAIL_MAX.
  std::optional<int64_t> max_retries;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  // Accept even when no current node could ever fit it (nodes may join later).
  bool keep_pending_if_infeasible = false;
  // Carried for the agent; the core does not interpret them.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;  // absolute; "" = the agent's own working directory
  // Wall-clock limit of one attempt: past it the task is killed and failed (not retried).
  std::optional<DurationMs> time_limit_ms;
  // Set: the agent gives the task a heartbeat file and reports it hung when the file was not
  // touched for this long (CN109992422A claim 7); the core only carries it.
  std::optional<DurationMs> heartbeat_timeout_ms;
  // Who submitted it and for which team: set by the server from the caller's identity, never
  // taken from the request; the core does not interpret them.
  std::string user;
  std::string team;
  // ---- gangs and preemption (README.md, "Gangs, reservations and preemption") ----
  // Multi-node task: `nodes` distinct nodes with `gpus` GPUs (and `resources`) on each, one
  // process per node (torchrun-style). Placed all at once or not at all. 1 = as before.
  int64_t nodes = 1;
  // Processes per node of a gang (torchrun's --nproc-per-node): each sees gpus / K of its
  // node's GPUs. The agent starts them; the core only checks that K divides `gpus`.
  int64_t tasks_per_node = 1;
  // A gang that holds a reservation this long without starting gives it up and says why;
  // absent = SchedulerConfig::gang_timeout_ms.
  std::optional<DurationMs> gang_timeout_ms;
  // Priority class name (SchedulerConfig::priority_classes); "" = the default class.
  std::string priority_class;
  // false: never chosen as a preemption victim.
  bool preemptible = true;
  // Preempted: SIGTERM, then SIGKILL after this long; absent = SchedulerConfig's
  // preemption_grace_ms.
  std::optional<DurationMs> grace_ms;
  // The signal every stop sends first (preemption, time limit, cancel), `grace` before
  // SIGKILL, as Slurm's --signal (core/stop_signal.h); nullopt = SIGTERM.
  std::optional<int> stop_signal;
  // Set for a task of a job array (`submit --array`); see ArrayMember.
  std::optional<ArrayMember> array;
};

// GPUs a task holds in all: per node times nodes.
inline int64_t TotalGpus(const TaskSpec& s) { return s.gpus * std::max<int64_t>(1, s.nodes); }

// Rich lifecycle state.
enum class TaskState {
  kPending,    // in Q or FQ
  kAssigned,   // reserved on a node, assignment sent, not yet reported started
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  // In Q after a higher priority class stopped it (not a failure): pending. Last, so that
  // the values stored by earlier versions keep their meaning.
  kPreempted,
};
const char* TaskStateName(TaskState s);
// "task 3 has already succeeded", "... has already failed", "task 3 was already cancelled".
std::string AlreadyEndedMessage(uint64_t id, TaskState s);

// Why a task ended without success (issue 41), as Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL:
// set when the task becomes failed or cancelled, kNone otherwise. Stored by name, so only
// ever add values.
enum class Failure {
  kNone,
  kExit,           // its program exited non-zero (or was killed by a signal) too often
  kTimeout,        // its time limit (`--time`) was reached
  kOutOfMemory,    // the kernel's OOM killer killed it at its memory limit
  kNodeLost,       // its node stopped heartbeating (node_lost_after)
  kLaunch,         // it could not start: no such program or working directory
  kCancelled,      // `gpusched cancel`
  kPreempted,      // stopped for a higher priority with no retry left
  kIdle,           // stopped for holding idle GPUs (the server's idle_action)
  kHung,           // silent or stopped (SIGSTOP, stale heartbeat file) past task_timeout
  kUnschedulable,  // no node fitted in max_placement_failures passes
};
// "" for kNone, else the lowercase name above ("exit", "out_of_memory", ...).
const char* FailureName(Failure f);
// The Failure named `name` ("" = kNone); nullopt for an unknown name.
std::optional<Failure> FailureFromName(std::string_view name);
// Waiting in Q or FQ (pending, or preempted and requeued).
inline bool IsPending(TaskState s) {
  return s == TaskState::kPending || s == TaskState::kPreempted;
}
inline bool IsTerminal(TaskState s) {
  return s == TaskState::kSucceeded || s == TaskState::kFailed || s == TaskState::kCancelled;
}

// What the executor last said of a running attempt in its task heartbeat (CN109992422A
// claim 7). A hung attempt (stopped, heartbeat-stale) is not alive: its heartbeats do not
// keep it from being reclaimed after T_task (claim 8).
enum class ExecutorStatus {
  kUnreported,      // no status (noop executor, older agents): a heartbeat means alive
  kRunning,
  kStopped,         // every process of the task is stopped (SIGSTOP, SIGTSTP)
  kHeartbeatStale,  // its heartbeat file is older than its heartbeat_timeout
};
const char* ExecutorStatusName(ExecutorStatus s);  // "", "running", "stopped", "heartbeat-stale"
inline bool IsHung(ExecutorStatus s) {
  return s == ExecutorStatus::kStopped || s == ExecutorStatus::kHeartbeatStale;
}

// CN115981827A claims 1, 3, 7: 2 = waiting to be scheduled, 0 = scheduled successfully,
// 1 = scheduling or execution failed.
enum class ClaimStatus : int { kScheduled = 0, kFailed = 1, kWaiting = 2 };

enum class QueueMembership { kNone, kMain, kFailure };

struct Placement {
  size_t node_index = 0;
  std::string node;
  std::vector<int> gpus;          // device indices on that node, ascending
  std::vector<MiB> gpu_mem_mib;   // reserved on each of them (same order as gpus)
  Resources resources;
  bool exclusive = false;
  // The topology rule that chose these GPUs over the plain CN109992422A order; "" = none.
  std::string topology_rule;
};

struct Transition {
  TimeMs at_ms = 0;
  TaskState state = TaskState::kPending;
  std::string reason;
};

struct Task {
  TaskId id;
  TaskSpec spec;
  // Resolved GPU memory need per GPU (explicit value, table estimate, or whole GPU).
  MiB gpu_mem_need_mib = 0;
  bool exclusive = false;
  std::string mem_source;  // "explicit", "table", "learned", "formula", "whole-gpu", "none"

  int st = 0;       // CN115981827A score St in [4, 20]
  int base_pt = 0;  // Pt at admission
  int pt = 0;       // current Pt, grows by demotion
  uint64_t seq = 0; // first-submission order; ties inside one Pt band
  // Fair-share rank of its place in Q (core/fair_share.h), fixed while it is in Q; memory only.
  int64_t fs_rank = 0;

  TaskState state = TaskState::kPending;
  ClaimStatus claim = ClaimStatus::kWaiting;
  QueueMembership queue = QueueMembership::kNone;
  int64_t fail_cnt = 0;            // execution failures (CN115981827A claim 3)
  int64_t placement_failures = 0;  // passes in which no node fitted (PATENTS.md section 6)
  int64_t attempts = 0;            // times assigned to a node
  int64_t preemptions = 0;         // times suspended by Scheduler::Preempt
  // Service received: time from assignment to release, summed over every finished, failed
  // or suspended run (the current run is not included; see core/queue_order.h AttainedMs).
  DurationMs attained_ms = 0;
  // When the latest run ended, and attained_ms at the latest 2D-LAS starvation promotion
  // (core/queue_order.h); memory only.
  TimeMs released_ms = 0;
  DurationMs las_base_ms = 0;

  std::optional<Placement> placement;  // a gang's rank 0
  // A gang's ranks 1..nodes-1, each on its own node (rank 0 is `placement`); empty otherwise.
  std::vector<Placement> gang_placements;
  // A gang's ranks whose process of the current attempt exited 0 (RankFinished); the task
  // succeeds when all have. Empty for other tasks.
  std::set<int> ranks_done;
  // Priority class value, resolved at admission (SchedulerConfig::priority_classes).
  int64_t priority = 0;
  // The task whose priority preempted this one most recently (`why`/`show`); memory only.
  TaskId preempted_by;
  // When a preemptive queue order last stopped it (Scheduler::PreemptForOrder); for one
  // quantum after it may not preempt by priority. Memory only.
  std::optional<TimeMs> order_preempted_ms;
  // The attempt a preemption stopped whose exit is still to come (0 = none); memory only.
  int64_t preempted_attempt = 0;
  // Preempted attempts that exited 0 within their grace (checkpointed), and the latest of
  // them (0 = none): the task resumes from its checkpoint (issue 37).
  int64_t checkpoints = 0;
  int64_t checkpointed_attempt = 0;
  // A gang whose reservation timed out may reserve again from this time on; memory only.
  TimeMs gang_reserve_after_ms = 0;
  TimeMs submitted_ms = 0;
  TimeMs assigned_ms = 0;
  // The attempt's last sign of life: its start, or a task heartbeat that did not say it is
  // hung (CN109992422A claims 7-8).
  TimeMs last_heartbeat_ms = 0;
  // What the latest task heartbeat said of the executor, and why it is hung ("" otherwise);
  // memory only, reset for each attempt.
  ExecutorStatus executor_status = ExecutorStatus::kUnreported;
  std::string executor_detail;
  // The current attempt's GPU use from its task heartbeats (CN109992422A claim 7); memory
  // only, not stored. -1 = not reported. busy_ms: the last report of utilisation > 0, or the
  // start of the attempt; idle: at 0 % since busy_ms for the server's idle_after or longer.
  int gpu_util = -1;
  MiB gpu_mem_used_mib = -1;
  TimeMs busy_ms = 0;
  bool idle = false;
  TimeMs finished_ms = 0;
  std::optional<int> exit_code;
  std::string reason;  // why it is pending, failed or cancelled
  Failure failure = Failure::kNone;  // failed or cancelled: why (issue 41)
  // The node of each attempt's rank 0 (attempt -> node), the latest kMaxHistory attempts:
  // `gpusched logs --attempt N` reads an earlier attempt's log there (issue 41).
  std::map<int64_t, std::string> attempt_nodes;
  PlacementReport last_report;      // of the last placement attempt
  std::string last_report_summary;  // DescribeReport(last_report)
  // The pass that produced last_report (SchedulerStats::passes then; 0 = none yet) and when
  // (the scheduler clock's ms): `why` says how fresh its reason is (issue 37). Memory only, not stored.
  int64_t report_pass = 0;
  TimeMs report_ms = 0;
  // Capped at kMaxHistory entries: the first (submitted) and the latest ones.
  std::vector<Transition> history;
};

inline constexpr size_t kMaxHistory = 64;

}  // namespace gpusched::core
