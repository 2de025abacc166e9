#pragma once
// CN110955526B claim 2 across nodes: the driver's side. A stage's partitions (Spark tasks) are
// assigned to executors (Spark slaves, one per node or several) by their available GPU memory
// and free CPUs, with executor_choice.h's rule applied executor by executor:
//
//   free CPUs < max(min_free_cpus, the partition's CPUs) -> not this executor now
//   some GPU has the partition's subtask memory           -> its GPU executor (that GPU)
//   no GPU has it                                         -> its CPU executor
//
// Partitions are assigned in order, each to the best executor at that moment, whose free CPUs
// and the chosen GPU's free memory are then charged with the partition: a GPU executor beats a
// CPU executor; among GPU executors the one whose best GPU has the most free memory; among
// CPU executors the one with the most free CPUs; ties by executor name (then by GPU index).
// A partition no executor can take is left unassigned (executor "", it waits). Deterministic:
// the input order of executors does not matter.
//
// Pure functions; no clock, no I/O. The executors come from the caller or from the gpusched
// server's REST `GET /api/v1/nodes` JSON (ParseNodesJson).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::chunks {

struct ExecutorOffer {
  std::string name;                  // unique; ties are broken by it
  std::string node;                  // the machine it runs on (informational)
  std::vector<int64_t> gpu_free_bytes;  // per GPU, by index
  int free_cpus = -1;                // < 0: unknown, no CPU limit applies
};

struct StageDemand {
  int partitions = 0;
  int64_t subtask_bytes = 0;  // GPU memory one partition's chunk subtask needs
  int cpus = 1;               // CPUs a partition holds on its executor
  int min_free_cpus = 0;      // the free-CPU limit: an executor with fewer free is not used
};

struct PartitionPlacement {
  int partition = 0;
  std::string executor;  // "": no executor can take it now
  int gpu = -1;          // the GPU on a GPU executor; -1 on a CPU executor or unassigned
  std::string decision;  // executor_choice's DescribeDecision of the chosen executor
};

// InvalidArgument for duplicate or empty executor names, negative memory, or a bad demand
// (partitions < 0, subtask_bytes < 0, cpus < 1, min_free_cpus < 0).
StatusOr<std::vector<PartitionPlacement>> PlanStage(std::vector<ExecutorOffer> executors,
                                                    const StageDemand& demand);

// The executors of a `GET /api/v1/nodes` body: {"nodes": [{"name", "available", "gpus":
// [{"index", "free_mib" (or total_mib - allocated_mib), "healthy"}], "free_cpus"?}]}. One
// executor per available node, named after it, with its healthy GPUs (free MiB as bytes).
// The server reports free_cpus (whole CPUs its tasks do not reserve); a body without it reads -1.
// InvalidArgument naming the field ("nodes[1].gpus[0].free_mib: ...") on bad input.
StatusOr<std::vector<ExecutorOffer>> ParseNodesJson(std::string_view json);

}  // namespace gpusched::chunks
