#pragma once
// StageRunner: executes a job's DAG of stages on a ChunkScheduler, one stage at a time with a
// barrier between them (CN110955526B step (11), read as a master loop: [choice]). Each stage's
// input is split into chunks (step 7) and grouped into `tasks` Spark tasks (contiguous runs
// of chunks, at most one task per chunk); claim 2 (executor_choice.h) sends each task to the
// GPU executor or the CPU executor by free GPU memory and free CPUs, and tasks beyond the
// free CPUs (ChunkConfig::free_cpus) run in a later wave. A task's chunks run as chunk
// subtasks (step 8); cached buffers get CACHE subtasks (step 9) before their first use.
// Host buffers of 1 MiB or more are pinned for the run (Device::PinHost); a buffer that cannot
// be pinned is streamed from pageable memory and the reason goes to the log callback.
// Map outputs are gathered chunk by chunk into host memory; reduce partials are combined on the
// host in chunk order, so results never depend on timing.
//
// Thread-safety: Run() may be called from one thread at a time per runner.

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/executor.h"
#include "base/status.h"
#include "dispatch/chunks/chunk_scheduler.h"
#include "dispatch/chunks/job.h"
#include "dispatch/chunks/splitter.h"

namespace gpusched::chunks {

struct JobResult {
  // Every stage output, by buffer name: the caller's destination or runner-owned memory.
  std::map<std::string, HostBuffer> outputs;
  std::vector<std::string> stage_order;  // stage names as run
  ChunkStats stats;                      // this job's share of the scheduler's counters
  int64_t gpu_tasks = 0;                 // claim 2: tasks sent to the GPU executor
  int64_t cpu_tasks = 0;                 // claim 2: tasks sent to the CPU executor
  int64_t task_waves = 0;                // scheduler runs of stream tasks, over all stages
  int64_t pinned_bytes = 0;              // host bytes page-locked for the run
  int64_t pin_failures = 0;              // buffers streamed from pageable memory after a failed pin
  std::vector<std::unique_ptr<std::byte[]>> storage;  // runner-allocated outputs
};

class StageRunner {
 public:
  // All three must outlive the runner. `executor` supplies the threads that drive subtasks.
  StageRunner(ChunkScheduler& scheduler, const KernelRegistry& kernels, Executor& executor)
      : scheduler_(scheduler), kernels_(kernels), executor_(executor) {}

  // Validates, plans and runs `job`; its cached chunks are freed at the end, except those of
  // kept buffers (BufferSpec::keep), which later runs find again. Host buffers must stay valid
  // until Run() returns.
  StatusOr<JobResult> Run(const JobSpec& job);
  // Frees the kept chunks of every buffer at `data` (every size, version and chunk size); how
  // many kept buffers that was (0: none). Not while Run() runs. The scheduler's destruction
  // frees the rest.
  int ForgetKept(const void* data);
  // Receives one line per notable event (a buffer left unpinned, and why). Default: none.
  // Call before Run.
  void SetLog(std::function<void(const std::string&)> log) { log_ = std::move(log); }

 private:
  class HostPins;   // stage_runner.cc
  class BufferIds;  // stage_runner.cc: the chunk-key ids of one run
  // A kept buffer's chunks under one chunk size, as later runs look for them.
  struct KeptKey {
    const void* data;
    int64_t bytes;
    uint64_t version;
    int64_t chunk_bytes;
    auto operator<=>(const KeptKey&) const = default;
  };
  Status RunStage(const StageSpec& stage, const Kernel& kernel, int stage_index,
                  const std::map<std::string, HostBuffer>& buffers, BufferIds& ids,
                  const std::vector<std::string>& cached, JobResult& result);
  // Frees the kept chunks of `b`'s memory under another size or version (stale now).
  void DropStaleKept(const BufferSpec& b);
  // The id of kept buffer `b` cut into `chunk_bytes` chunks: the one an earlier run used, or new.
  uint64_t KeptId(const BufferSpec& b, int64_t chunk_bytes);
  // CN110955526B step (9): a CACHE subtask per chunk of each of the stage's persisted inputs
  // not yet resident (marked resident here).
  std::vector<Subtask> CacheSubtasks(const StageSpec& st, int stage_index,
                                     const std::map<std::string, HostBuffer>& buffers,
                                     const std::map<std::string, uint64_t>& ids,
                                     const std::vector<std::string>& cached,
                                     const std::vector<ChunkRange>& chunks);
  // Runs `subtasks` as `tasks` contiguous tasks, each on the executor claim 2 chooses.
  Status RunTasks(const std::vector<Subtask>& subtasks, int tasks, int64_t subtask_bytes,
                  JobResult& result);

  ChunkScheduler& scheduler_;
  const KernelRegistry& kernels_;
  Executor& executor_;
  std::function<void(const std::string&)> log_;
  std::set<uint64_t> cache_done_;         // per Run: buffer ids whose chunks are resident
  std::map<KeptKey, uint64_t> kept_;      // across runs: kept buffers' ids (BufferSpec::keep)
  static std::atomic<uint64_t> next_buffer_id_;
};

}  // namespace gpusched::chunks
