#pragma once
// CN110955526B claim 2 as a pure function: a stage's tasks are assigned to executors by the
// free memory and the free CPUs of the node. On one node there are two executors: the GPU
// executor (the task's chunk subtasks go to the GPUs by step (10)) and the CPU executor (the
// node's CPUs run the task's kernel on the host, as a Spark executor without GPUs would).
//
//   free CPUs < the task's CPUs          -> no executor now: the task waits for CPUs
//   some GPU has the subtask's memory    -> GPU executor
//   no GPU has it                        -> CPU executor
//
// [choice] "Free memory" is per GPU, not summed: a chunk subtask runs on one GPU, so two GPUs
// with 30 MiB free each cannot run a 40 MiB subtask. The memory a task needs on a GPU is that
// of one chunk subtask (its chunks stream through the GPU one subtask at a time).

#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "dispatch/chunks/placement.h"

namespace gpusched::chunks {

struct TaskDemand {
  int64_t subtask_bytes = 0;  // device memory of one chunk subtask (inputs and output)
  int cpus = 1;               // CPUs the task holds while it runs
};

struct GpuExecutor {
  int gpus_with_room = 0;  // GPUs with the subtask's memory free
  bool operator==(const GpuExecutor&) const = default;
};
struct CpuExecutor {
  std::string reason;
  bool operator==(const CpuExecutor&) const = default;
};
struct NoExecutor {  // not enough free CPUs: wait for running tasks to end
  std::string reason;
  bool operator==(const NoExecutor&) const = default;
};
using ExecutorDecision = std::variant<GpuExecutor, CpuExecutor, NoExecutor>;

// CN110955526B claim 2. `gpus` in any order (only free_bytes is read); `free_cpus` < 0 means
// no CPU limit.
ExecutorDecision ChooseExecutor(std::span<const GpuView> gpus, int free_cpus, const TaskDemand& task);

// "gpu-executor (2 GPUs with room)", "cpu-executor (...)", "no-executor (...)".
std::string DescribeDecision(const ExecutorDecision& d);

}  // namespace gpusched::chunks
