#pragma once
// `why` in a user's words: what a waiting task needs against the most any node offers now,
// e.g. "needs 4 free GPUs on one node; most free: dev-2 has 2" or
// "needs 6GiB on one GPU; most free is 4GiB on dev-2 GPU 1".

#include <string>

#include "core/cluster_state.h"
#include "core/filters.h"

namespace gpusched::core {

// Looks at the nodes that take new work (reachable, available, not cordoned or draining);
// "" when the request needs no GPU.
std::string DescribeNeed(const ClusterState& cluster, const PlacementRequest& r,
                         const FilterOptions& o);

}  // namespace gpusched::core
