#pragma once
// StageRunner: executes a job's DAG of stages on a ChunkScheduler, one stage at a time with a
// barrier between them (CN110955526B step (11), read as a master loop: [choice]). Each stage's
// input is split into chunks (step 7), grouped into `tasks` Spark tasks, and run as chunk
// subtasks (step 8); cached buffers get CACHE subtasks (step 9) before their first use.
// Map outputs are gathered chunk by chunk into host memory; reduce partials are combined on the
// host in chunk order, so results never depend on timing.
//
// Thread-safety: Run() may be called from one thread at a time per runner.

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/executor.h"
#include "base/status.h"
#include "dispatch/chunks/chunk_scheduler.h"
#include "dispatch/chunks/job.h"

namespace gpusched::chunks {

struct JobResult {
  // Every stage output, by buffer name: the caller's destination or runner-owned memory.
  std::map<std::string, HostBuffer> outputs;
  std::vector<std::string> stage_order;  // stage names as run
  ChunkStats stats;                      // this job's share of the scheduler's counters
  std::vector<std::unique_ptr<std::byte[]>> storage;  // runner-allocated outputs
};

class StageRunner {
 public:
  // All three must outlive the runner. `executor` supplies the threads that drive subtasks.
  StageRunner(ChunkScheduler& scheduler, const KernelRegistry& kernels, Executor& executor)
      : scheduler_(scheduler), kernels_(kernels), executor_(executor) {}

  // Validates, plans and runs `job`; its cached chunks are freed at the end. Host buffers
  // must stay valid until Run() returns.
  StatusOr<JobResult> Run(const JobSpec& job);

 private:
  Status RunStage(const StageSpec& stage, const Kernel& kernel, int stage_index,
                  const std::map<std::string, HostBuffer>& buffers,
                  const std::map<std::string, uint64_t>& ids, const std::vector<std::string>& cached);

  ChunkScheduler& scheduler_;
  const KernelRegistry& kernels_;
  Executor& executor_;
  std::map<std::string, bool> cache_done_;  // per Run: cached input buffers already resident
  static std::atomic<uint64_t> next_buffer_id_;
};

}  // namespace gpusched::chunks
