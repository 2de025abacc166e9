#pragma once
// Backfill with reservations (issue 37), Slurm's backfill as a pure computation over a view
// of the state table. The first task in queue order that needs more than one GPU in all
// (several GPUs on one node, or a gang) and does not fit holds a reservation: the GPUs where
// it can start soonest, and when, from the known ends of what runs there. Other tasks may
// take reserved GPUs only when their own time limit ends before that start (backfill), so
// a stream of small tasks can no longer keep a wide task waiting forever: it starts no later
// than the latest end its reservation waits for.
//
// The Scheduler decides who reserves and applies it (scheduler_plan.cc); this file only
// computes: when running tasks end, where and when a request fits first, who may backfill,
// the view a task that may not backfill is answered on, and the words `why` uses.
// Thread-safety: plain functions over values; nothing is shared.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "core/cluster_state.h"
#include "core/filters.h"
#include "core/task.h"

namespace gpusched::core {

// A start (or end) that cannot be known: some task it waits for has neither a time limit
// nor an expected duration.
inline constexpr TimeMs kUnknownTime = std::numeric_limits<TimeMs>::max();

// What the end of a running attempt is known from.
enum class EndBasis { kTimeLimit, kExpectedDuration, kUnknown };

struct KnownEnd {
  TimeMs at_ms = kUnknownTime;
  EndBasis basis = EndBasis::kUnknown;
};

// The latest end of an attempt assigned at `assigned_ms`: its time limit (`--time`, which
// the scheduler enforces, so the end is certain), else its expected duration (`--duration`)
// less the service `attained_ms` before this attempt (an estimate), else unknown. An end
// already past is `now_ms` (it ends at any moment).
KnownEnd EndOfAttempt(const TaskSpec& s, TimeMs assigned_ms, DurationMs attained_ms,
                      TimeMs now_ms);

// True for a task that needs more than one GPU in all: such a task reserves when it is the
// first of its kind in queue order that does not fit.
inline bool IsWide(const TaskSpec& s) { return TotalGpus(s) > 1; }

// One placement that holds resources now, and when it ends.
struct Holding {
  TaskId task;
  KnownEnd end;
  const Placement* at = nullptr;  // not owned; valid while the caller's tasks are
};

// What the reserving task holds on one node.
struct ReservedNode {
  size_t index = 0;
  std::vector<int> gpus;  // ascending device indices
  // CPU and RAM a task that may not backfill must leave free now, so that what is free at
  // the start still fits the reserving task (its need less what ends there before).
  Resources withheld;
};

struct Reservation {
  TaskId task;
  std::vector<ReservedNode> nodes;  // ascending index; one per rank
  TimeMs start_ms = kUnknownTime;   // planned start; kUnknownTime = unknown
  TimeMs since_ms = 0;              // when the task first reserved (reservation timeout)
  // The running tasks whose ends the start waits for, ascending id, each with its basis.
  std::vector<std::pair<TaskId, EndBasis>> waits_for;

  bool start_known() const { return start_ms != kUnknownTime; }
  int64_t gpus() const;  // in all
};

// The reservation of `ranks` distinct nodes for `shape` (one rank per node): on each node
// the holdings (`holdings[i]` holds node i's, any order) end one by one, earliest first
// (ties by task id), until the shape fits; the `ranks` nodes where it fits first win (ties
// by index), and the start is the latest of theirs. On each, the GPUs held are the ones
// that fit at the start, the latest freed first (the ones free now stay usable by others
// meanwhile), then by index. nullopt when fewer than `ranks` nodes would fit even with
// every holding gone. Deterministic: the same inputs give the same reservation.
std::optional<Reservation> PlanEarliestStart(TaskId task, const ClusterState& view,
                                             const PlacementRequest& shape, int64_t ranks,
                                             std::vector<std::vector<Holding>> holdings,
                                             const FilterOptions& fo, TimeMs now_ms);

// Slurm's backfill rule: a task other than the holder may take reserved GPUs only when its
// time limit ends by the planned start. A task without a time limit never does (its
// expected duration is not enforced), nor does any task while the start is unknown.
// `trust_expected`: a task without a time limit backfills by its expected duration instead
// (the simulator, whose stated durations are the true ones).
bool MayBackfill(TaskId id, const TaskSpec& s, const Reservation& r, TimeMs now_ms,
                 bool trust_expected = false);

// Turns `view` into the view of a task that may not backfill: the reserved GPUs take no
// task (marked unhealthy in this copy only) and the withheld CPU and RAM are taken.
void BlockReserved(ClusterState& view, const Reservation& r);

// `why`'s words for the holder: "reserved 4 GPUs on dev-1 from ~12s (time limits of tasks
// 3, 5)", "reserved 2 nodes (planned start in 1m40s): 4 GPUs on each of n0, n1 (expected
// duration of task 7)", or "..., start unknown: task 9 has no time limit or expected
// duration".
std::string DescribeReservation(const Reservation& r, const ClusterState& view, TimeMs now_ms);

// `why`'s words for a task that may not backfill: "; 4 GPUs on dev-1 are reserved for task
// 12 and its time limit would not end before the reservation starts" (or "... and it has no
// time limit to backfill by"). No relative time: a task that waits pass after pass for the
// same reason keeps the same words (the store writes a task only when they change).
std::string DescribeBlocked(const Reservation& r, const TaskSpec& s, const ClusterState& view);

}  // namespace gpusched::core
