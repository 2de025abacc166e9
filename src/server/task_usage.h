#pragma once
// What a task held and when, as accounting reads it (server/accounting.h UsageOf): shared by
// `acct` and the rollup rows of archived tasks (server/rollups.h, issue 38). No protobuf here,
// so that control_plane.h can name it.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpusched::server {

// Whose a task is (server/accounting.h OwnerOf).
struct TaskOwner {
  std::string user, team;
};

// (node, gpu index) -> the GPU's memory in MiB.
using GpuTotals = std::map<std::pair<std::string, int>, int64_t>;

// What a task held and when: the one reading of a task that accounting and the rollups share.
struct TaskUsage {
  TaskOwner owner;
  std::string failure;  // Task.failure, "none" when it has none
  double gpus = 0;      // whole GPUs' worth: m/t of each GPU, 1 where t is not known
  int64_t mem_mib = 0;  // GPU memory reserved, summed over its GPUs
  // Run intervals [from, to), uncut; one still open ends at finished_ms, or `now_ms`.
  // Empty for a task never placed.
  std::vector<std::pair<int64_t, int64_t>> runs;
};

}  // namespace gpusched::server
