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

// The Kubernetes-style rules (CN115981827A claim 1) when they alone leave no node: "no node
// matches the node selector zone=a", or "every node left has a taint the task does not
// tolerate: gpu1 has dedicated=infer:NoSchedule (...)". Looks at the nodes that take new work
// (in name order); "" when one of them passes both the taint and the selector filters.
std::string DescribeRules(const ClusterState& cluster, const PlacementRequest& r);

}  // namespace gpusched::core
