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
//   kTwoDimLas         Tiresias's discretized 2D-LAS (Gu et al., NSDI'19): the queue the
//                      GPU-time attained since the task's last starvation promotion falls in
//                      (dlas_thresholds), then assigned or running tasks ahead of pending ones
//                      inside a queue, then seq. Needs no duration. With a promote knob, a
//                      starved pending task returns to queue 0 (Scheduler::PromoteStarved).
// A task without a stated duration ranks after every task with one under the duration orders.
//
// Thread-safety: pure functions over values.

#include <cstdint>
#include <optional>
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
  kTwoDimLas,
};

const char* QueueOrderName(QueueOrder order);

struct QueueOrderOptions {
  QueueOrder order = QueueOrder::kPriority;
  // kLeastAttained: attained GPU-time (GPU-ms) at which a task moves to the next, lower queue;
  // ascending. [choice] 1 and 10 GPU-hours, three queues.
  std::vector<int64_t> las_thresholds_gpu_ms = {3'600'000, 36'000'000};
  // kTwoDimLas: the same, for 2D-LAS. [Tiresias sim] 3,250 and 7,200 GPU-seconds, three queues.
  std::vector<int64_t> dlas_thresholds_gpu_ms = {3'250'000, 7'200'000};
  // kTwoDimLas starvation rule (Tiresias PROMOTEKNOB): a pending task whose wait since its last
  // run reaches knob x the time it executed since its last promotion returns to queue 0; its
  // total attained service keeps counting. 0 = off (Tiresias dlas-gpu). In [0, 1e6].
  double dlas_promote_knob = 0;
  // Order preemption (srtf, las, dlas; Scheduler::PreemptForOrder, issue 37): a task that
  // started or resumed less than this long ago is never stopped by the order, and a task the
  // order stopped may not preempt by priority for this long. [choice] 60 s: several
  // heartbeat periods and a typical checkpoint save; a preemption costs a restart, so a
  // minute of run is the least it buys. The simulator's --policy baselines use 0 (textbook).
  DurationMs quantum_ms = 60'000;

  Status Validate() const;
};

// Orders that re-decide running tasks (srtf, las, dlas): Scheduler::PreemptForOrder applies.
bool IsPreemptiveOrder(QueueOrder order);

// Service a task has received: every finished or suspended run plus the current one at `now`.
DurationMs AttainedMs(const Task& t, TimeMs now);

// GPU-time attained, for LAS: attained time times the task's GPU count (at least 1).
int64_t AttainedGpuMs(const Task& t, DurationMs attained_ms);

// The GPU-time that places a task in a LAS queue: its attained GPU-time minus what it had
// attained at its last starvation promotion (2D-LAS only; otherwise nothing is subtracted).
int64_t LasServiceGpuMs(const Task& t, DurationMs attained_ms);

// The queue thresholds of the order (las_ or dlas_thresholds_gpu_ms).
const std::vector<int64_t>& LasThresholds(const QueueOrderOptions& options);

// Index of the LAS queue for `attained_gpu_ms` (0 = the highest-priority queue).
int LasQueueIndex(const QueueOrderOptions& options, int64_t attained_gpu_ms);

// kTwoDimLas with a promote knob: when the pending task `t` is due to return to queue 0
// (released_ms + knob x the time executed since its last promotion, rounded up). nullopt
// when the rule is off, the task is not pending, or it executed nothing since then.
std::optional<TimeMs> PromotionDueMs(const QueueOrderOptions& options, const Task& t);

// The key of `t` in Q under `options`, given the service it has attained. Only the rank
// depends on the order; under kPriority the key is exactly (Pt, seq, id).
QueueKey MakeQueueKey(const QueueOrderOptions& options, const Task& t, DurationMs attained_ms);

}  // namespace gpusched::core
