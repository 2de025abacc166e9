#pragma once
// The policies `gpusched sim` compares, each as a core::SchedulerConfig, so every one of them
// runs through the production core::Scheduler. Exact semantics:
//
//   gpusched       the production defaults: Q in (Pt, first submission) (CN115981827A claim 2),
//                  a task no node fits goes to FQ and returns demoted every t2 (claim 3,
//                  PATENTS.md section 6), GPUs picked by CN109992422A claims 3-4.
//   fifo           strict FIFO by submission, non-preemptive, head-of-line blocking: a pass
//                  stops at the first task that does not fit.
//   fifo-backfill  submission order, non-preemptive; a task that does not fit is skipped and
//                  later tasks may start.
//   sjf            shortest true duration first (oracle), non-preemptive, a misfit is skipped.
//   srtf           shortest remaining true time first (oracle), preemptive, re-decided at
//                  every arrival and completion, greedy in that order (core/preemption.h), no
//                  preemption overhead.
//   las            discretized least attained service on GPU-time (thresholds configurable),
//                  FIFO inside a queue, preemptive like srtf, also re-decided when a running
//                  task crosses a threshold.
//   dlas           Tiresias's discretized 2D-LAS (no oracle): queues by GPU-time attained
//                  (thresholds configurable, default 3,250 and 7,200 GPU-seconds), inside a
//                  queue running tasks ahead of pending ones, then first submission;
//                  preemptive like las. Optional starvation rule (promote knob, default off).
//   fairshare      the gpusched policy plus fair share between teams (the trace's virtual
//                  clusters) and users (core/fair_share.h: half-life 7 days, recomputed every
//                  5 min of simulated time, weights 1000/1000). With --quota, team quotas
//                  with borrowing and reclaim (core/quota.h) apply under every policy.
// Fair share is off (weight 0) under every other policy, so their results do not change.
// Every baseline waits in Q for capacity (CapacityWait::kStayQueued) and passes run on every
// event. All policies see the trace's true duration as the task's stated duration (it feeds
// the CN115981827A score of the gpusched policy).
//
// Node and GPU choice (independent of the order, for the FGD comparison):
//   gpusched   the production placement (weighted LeastAllocated + BalancedAllocation,
//              GPUs by CN109992422A's principles)
//   best-fit   the node whose GPU memory is the fullest after placement, the GPU with the
//              least memory left over
//   worst-fit  the node with the most free resources (LeastAllocated), GPUs spread
//   min-fragmentation  node and GPUs by the least growth of expected fragmentation against
//              the task shapes submitted so far (core/fragmentation.h, the packing
//              measure), ties by best fit
//   fgd        the same orders with FGD's next-task measure (kNextTask)

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/scheduler_config.h"

namespace gpusched::sim {

enum class Policy { kGpusched, kFifo, kFifoBackfill, kSjf, kSrtf, kLas, kDlas, kFairShare };
enum class PlacementPolicy { kGpusched, kBestFit, kWorstFit, kMinFragmentation, kFgd };

StatusOr<Policy> ParsePolicy(std::string_view name);
const char* PolicyName(Policy p);
// The policies of the golden regression table (fairshare is not among them).
std::vector<Policy> AllPolicies();
StatusOr<PlacementPolicy> ParsePlacementPolicy(std::string_view name);
const char* PlacementPolicyName(PlacementPolicy p);

bool IsPreemptive(Policy p);

// `sim --priority VC=CLASS`: the jobs of virtual cluster VC run in priority class CLASS,
// one of `classes` (SchedulerConfig::priority_classes). InvalidArgument naming --priority and
// the value otherwise.
StatusOr<std::pair<std::string, std::string>> ParseVcPriority(
    std::string_view text, const std::vector<core::SchedulerConfig::PriorityClass>& classes);

// The scheduler configuration of a policy. Liveness timeouts are disabled: the simulator sends
// no heartbeats, so no node or task may time out. `las_thresholds_gpu_ms` (las and dlas)
// empty = the core's default; `promote_knob` is the dlas starvation knob (0 = off).
core::SchedulerConfig MakeSchedulerConfig(Policy policy, PlacementPolicy placement,
                                          const std::vector<int64_t>& las_thresholds_gpu_ms,
                                          double promote_knob = 0);

}  // namespace gpusched::sim
