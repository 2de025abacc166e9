#pragma once
// The topology rules of GPU choice inside a node (topology.h), applied after the
// CN109992422A order has ranked the GPUs that fit. Pure; ties by that order, then by index.

#include <cstdint>
#include <string>
#include <vector>

#include "core/node.h"

namespace gpusched::core {

// `order`: the GPUs that fit the request, best first by the CN109992422A principles.
// Returns the `want` GPUs to use (ascending) and, when a topology rule chose differently
// from the first `want` of `order`, says which in `rule`. A node without topology gets the
// first `want` of `order` and no rule.
std::vector<int> PickByTopology(const NodeState& node, const std::vector<int>& order,
                                int64_t want, std::string* rule);

}  // namespace gpusched::core
