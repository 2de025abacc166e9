#pragma once
// What one placement attempt found: per-filter rejection counts and, when a node was chosen,
// its score breakdown. Kept with each task so `why` can answer from the last decision.

#include <cstdint>
#include <string>
#include <vector>

#include "core/filters.h"

namespace gpusched::core {

struct ScorePart {
  std::string name;
  double value = 0;
  double weight = 0;
};

struct PlacementReport {
  int64_t total_nodes = 0;
  int64_t feasible_nodes = 0;
  FilterCounts rejected{};
  size_t chunks_used = 1;  // 1 = sequential
  // Nodes the decision looked at: total_nodes for a scan (and for every decision that placed
  // nothing); for a placement through the node index (issue 43), the nodes of the classes it
  // examined, and then `feasible_nodes` and `rejected` count those nodes only.
  int64_t examined_nodes = 0;
  std::string chosen_node;
  double score = 0;
  std::vector<ScorePart> breakdown;  // of the chosen node
  std::string topology_rule;         // the topology rule that chose the GPUs; "" = none
};

// "0/120 nodes fit: 80 insufficient GPU memory, 40 unreachable" or
// "placed on node-7 (score 81.2: LeastAllocated 75.0, BalancedAllocation 87.4)".
// `whole_gpus`: the request holds GPUs exclusively, so a node rejected by GpuMemoryFit lacks
// free GPUs, not memory, and is described so.
std::string DescribeReport(const PlacementReport& report, bool whole_gpus = false);

}  // namespace gpusched::core
