#pragma once
// Cluster ids (issue 39): a store makes one when it is created and keeps it forever; the
// server hands it to every agent at registration, and an agent keeps the id of the cluster
// its task files belong to. A new store (state.db deleted, another etcd prefix) is a new
// cluster, whose task ids start again at 1: the id tells its tasks from the old ones.
//
// An id is 128 random bits written as 32 lower-case hex digits. It also names a folder on
// the node (DATA_DIR/clusters/ID), so only that form is accepted.
// Here, not in store/, because the agent checks the ids it is given too.

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched {

inline constexpr size_t kClusterIdLength = 32;

// A new id from the kernel's random source (getrandom(2)). Unavailable when it cannot be
// read (it blocks rather than fail while the pool is not yet initialised).
StatusOr<std::string> NewClusterId();

// Ok when `id` is 32 lower-case hex digits; otherwise InvalidArgument naming `what` (where
// the value came from) and the value (quoted, at most 64 bytes of it).
Status ValidateClusterId(std::string_view id, std::string_view what);

}  // namespace gpusched
