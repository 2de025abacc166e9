#pragma once
// Preemptive re-decision for the preemptive orders (SRTF, LAS, 2D-LAS): which running tasks
// must be suspended so that the cluster serves the live tasks in queue order.
//
// Semantics (exact, so results can be compared with other simulators):
//   1. Every live task (pending, assigned or running) gets its queue key at `now`, with the
//      attained service of its current run included (core/queue_order.h).
//   2. Walking the tasks in key order, a task is chosen when its GPU count fits in what is
//      left of the cluster's GPUs (a pool of `total_gpus`; a GPU share counts as one GPU);
//      a task that does not fit is skipped and the walk goes on (greedy in that order).
//   3. The victims are the assigned or running tasks that were not chosen. The caller
//      suspends them (Scheduler::Preempt) and then runs a pass, which places pending tasks on
//      nodes in the same key order.
// There is no preemption overhead here: a suspended task keeps its attained service.
// Composition with priority classes and the quantum (issue 37), both no-ops in the textbook
// setting (one class, quantum 0):
//   - the walk takes a higher Task::priority first and the order's key inside one value, so
//     the order never stops a task for one of a lower class, and priority preemption (which
//     stops only lower classes) never undoes what the order chose;
//   - an assigned or running task whose current run began less than `quantum_ms` ago
//     (QueueOrderOptions::quantum_ms), or that is not preemptible, is taken before any
//     other: it keeps its GPUs.
//
// Thread-safety: a pure function over a snapshot.

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "core/queue_order.h"
#include "core/task.h"

namespace gpusched::core {

// Returns the victims in ascending id order. Tasks in a terminal state are ignored.
std::vector<TaskId> SelectPreemptionVictims(const QueueOrderOptions& options,
                                            const std::vector<const Task*>& live,
                                            int64_t total_gpus, TimeMs now);

}  // namespace gpusched::core
