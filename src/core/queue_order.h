#pragma once
// QueueOrder: the order in which the main queue Q is served, as a small pure function from a
// task to its queue key. The default is CN115981827A claim 2 (Pt, then first submission); the
// others are the textbook baselines the simulator compares against (DESIGN.md "Simulator").
//
//   kPriority          (Pt, seq): CN115981827A claim 2. The default; rank is always 0.
//   kSubmission        seq only: FIFO by first submission (Pt ignored).
//   kShortestDuration  the task's stated duration (TaskSpec::duration_ms), then seq: SJF. In
//                      the simulator the stated duration is the true one (an oracle).
//   kShortestRemaining stated duration minus attained service, then seq: SRTF (oracle).
//   kLeastAttained     index of the discrete queue the attained GPU-time falls in, then seq:
//                      discretized LAS (Tiresias-style; FIFO inside one queue).
// A task without a stated duration ranks after every task with one under the duration orders.
//
// Thread-safety: pure functions over values.

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/task.h"
#include "core/task_queues.h"

namespace gpusched::core {

enum class QueueOrder {
  kPriority,
  kSubmission,
  kShortestDuration,
  kShortestRemaining,
  kLeastAttained,
};

const char* QueueOrderName(QueueOrder order);

struct QueueOrderOptions {
  QueueOrder order = QueueOrder::kPriority;
  // kLeastAttained: attained GPU-time (GPU-ms) at which a task moves to the next, lower queue;
  // ascending. [choice] 1 and 10 GPU-hours, three queues.
  std::vector<int64_t> las_thresholds_gpu_ms = {3'600'000, 36'000'000};

  Status Validate() const;
};

// Service a task has received: every finished or suspended run plus the current one at `now`.
DurationMs AttainedMs(const Task& t, TimeMs now);

// GPU-time attained, for LAS: attained time times the task's GPU count (at least 1).
int64_t AttainedGpuMs(const Task& t, DurationMs attained_ms);

// Index of the LAS queue for `attained_gpu_ms` (0 = the highest-priority queue).
int LasQueueIndex(const QueueOrderOptions& options, int64_t attained_gpu_ms);

// The key of `t` in Q under `options`, given the service it has attained. Only the rank
// depends on the order; under kPriority the key is exactly (Pt, seq, id).
QueueKey MakeQueueKey(const QueueOrderOptions& options, const Task& t, DurationMs attained_ms);

}  // namespace gpusched::core
