#pragma once
// Cluster descriptions for the simulator, as the core's NodeSpecs.
//
//   "NxG[xMEM]"  N identical nodes of G GPUs with MEM of GPU memory each (default 32GiB,
//                [choice]); every node gets 12 cores and 96 GiB of RAM per GPU ([choice], only
//                traces with CPU or RAM requests can notice), e.g. "100x8", "1x64x80GiB".
//   node list    CSV with columns sn,cpu_milli,memory_mib,gpu,model (the Alibaba
//                openb_node_list_gpu_node.csv) and an optional gpu_mem_mib column. The Alibaba
//                list gives no GPU memory: its GPUs get kDefaultListGpuMib, so that a pod's
//                gpu_milli share maps to an exact number of MiB (see sim/policy.h).
// Nodes are named node-0000, node-0001, ... (uniform) or by their `sn` (list).

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "core/node.h"

namespace gpusched::sim {

inline constexpr MiB kDefaultUniformGpuMib = 32 * 1024;
inline constexpr MiB kDefaultListGpuMib = 16'000;

StatusOr<std::vector<core::NodeSpec>> ParseClusterSpec(std::string_view spec);
StatusOr<std::vector<core::NodeSpec>> LoadNodeList(const std::string& path);

struct ClusterTotals {
  int64_t nodes = 0;
  int64_t gpus = 0;
  MiB gpu_mib = 0;
  MiB smallest_gpu_mib = 0;  // 0 when there are no GPUs
  int64_t max_node_gpus = 0;  // GPUs of the largest node
};
ClusterTotals Totals(const std::vector<core::NodeSpec>& nodes);

}  // namespace gpusched::sim
