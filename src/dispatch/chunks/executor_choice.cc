#include "dispatch/chunks/executor_choice.h"

#include <algorithm>

namespace gpusched::chunks {

ExecutorDecision ChooseExecutor(std::span<const GpuView> gpus, int free_cpus, const TaskDemand& task) {
  // CN110955526B claim 2: free CPUs first; a task on either executor holds its CPUs.
  if (free_cpus >= 0 && free_cpus < task.cpus) {
    return NoExecutor{"needs " + std::to_string(task.cpus) + " CPU(s), " +
                      std::to_string(free_cpus) + " free"};
  }
  // CN110955526B claim 2: then free memory, GPU by GPU.
  int with_room = 0;
  int64_t most_free = 0;
  for (const GpuView& g : gpus) {
    if (g.free_bytes >= task.subtask_bytes) ++with_room;
    most_free = std::max(most_free, g.free_bytes);
  }
  if (with_room > 0) return GpuExecutor{with_room};
  if (gpus.empty()) return CpuExecutor{"no GPUs"};
  return CpuExecutor{"no GPU has " + std::to_string(task.subtask_bytes) + " bytes free (most: " +
                     std::to_string(most_free) + ")"};
}

std::string DescribeDecision(const ExecutorDecision& d) {
  if (const auto* g = std::get_if<GpuExecutor>(&d)) {
    return "gpu-executor (" + std::to_string(g->gpus_with_room) + " GPUs with room)";
  }
  if (const auto* c = std::get_if<CpuExecutor>(&d)) return "cpu-executor (" + c->reason + ")";
  return "no-executor (" + std::get<NoExecutor>(d).reason + ")";
}

}  // namespace gpusched::chunks
