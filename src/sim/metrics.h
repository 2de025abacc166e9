#pragma once
// What a simulation measures, and the summary statistics over it.
//
// Definitions (so numbers can be compared with other simulators):
//   JCT          finish - submit of every finished job.
//   wait         JCT - true duration: all the time a job was not running (queued before its
//                first start and while suspended). Equals start - submit without preemption.
//   percentiles  nearest rank: the value at position ceil(p/100 * n) of the sorted values
//                (base/percentile.h).
//   makespan     last finish - first submit.
//   time averages are taken over [first submit, last finish] of the step functions sampled
//   at every change:
//   gpu_utilization        GPUs holding any reservation / all GPUs.
//   gpu_mem_utilization    reserved GPU memory / all GPU memory (whole GPUs count in full).
//   node_fragmentation     free GPUs on nodes that are partly busy / all free GPUs: the free
//                          GPUs a whole-node job cannot use.
//   gpu_mem_fragmentation  free memory on partly reserved GPUs / all free GPU memory: the
//                          leftovers of shared GPUs.

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/units.h"

namespace gpusched::sim {

enum class JobOutcome {
  kFinished,
  kRejected,     // the core refused it at submission (no node could ever fit it)
  kUnfinished,   // still queued or running when the events ran out (not expected)
  kUnallocated,  // allocation replay (FGD): no node fitted it on arrival
  kAllocated,    // allocation replay (FGD): placed on arrival (it never finishes there)
};
const char* JobOutcomeName(JobOutcome o);

struct JobRecord {
  std::string id;
  int64_t num_gpu = 0;
  double gpu_share = 0;  // GPUs requested, fractional shares included (num_gpu x milli/1000)
  TimeMs submit_ms = 0;
  TimeMs start_ms = -1;   // first start
  TimeMs finish_ms = -1;
  DurationMs duration_ms = 0;
  int64_t preemptions = 0;
  JobOutcome outcome = JobOutcome::kUnfinished;
  std::string reason;  // why rejected or unallocated
  std::string team;    // the trace's virtual cluster ("" = none)
};

// Cluster usage from time `at_ms` until the next sample.
struct UsageSample {
  TimeMs at_ms = 0;
  int64_t busy_gpus = 0;
  MiB reserved_gpu_mib = 0;
  int64_t fragmented_free_gpus = 0;
  MiB fragmented_free_mib = 0;
  int64_t queued = 0;  // tasks waiting in Q or FQ
};

struct Summary {
  int64_t jobs = 0;  // finished (allocation replay: placed)
  int64_t rejected = 0, unfinished = 0, unallocated = 0;
  double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
  double avg_wait_s = 0, p50_wait_s = 0, p99_wait_s = 0;
  double makespan_s = 0;
  double gpu_utilization = 0, gpu_mem_utilization = 0;
  double node_fragmentation = 0, gpu_mem_fragmentation = 0;
  int64_t preemptions = 0;
  // GPU-idle-while-waiting (issue 37): GPU-hours in which a GPU held no task while some task
  // waited in Q or FQ, over the same span as the utilisation (what a scheduler that keeps
  // every GPU busy drives to 0; a waiting task that fits on no idle GPU counts too).
  double gpu_idle_waiting_gpu_h = 0;
};

// Average wait and JCT of the finished jobs of one team (the trace's virtual cluster).
struct TeamSummary {
  std::string team;
  int64_t jobs = 0;
  double avg_wait_s = 0, avg_jct_s = 0;
};
// One row per team that has a finished job, by name ("" = "default").
std::vector<TeamSummary> SummarizeByTeam(const std::vector<JobRecord>& jobs);

Summary Summarize(const std::vector<JobRecord>& jobs, const std::vector<UsageSample>& usage,
                  int64_t total_gpus, MiB total_gpu_mib);

}  // namespace gpusched::sim
