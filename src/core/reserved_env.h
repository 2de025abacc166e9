#pragma once
// The environment names the product reserves for itself. A task's environment is data, never
// control: whatever a task (or its submitter) puts under these names is dropped by the agent,
// which then sets the values the product defines (the server refuses them at submission).
//
// Thread-safety: pure functions.

#include <string_view>

namespace gpusched::core {

// True for the names the product reserves: every name that starts with "GPUSCHED_".
bool IsReservedEnvName(std::string_view name);

// True for the reserved names the server itself sets in a task's environment (an array's
// index, a gang's node list, the processes per node), which the agent passes on from the
// assignment. REQUIRES for their trust: the server refuses reserved names at submission.
bool IsServerSetEnvName(std::string_view name);

}  // namespace gpusched::core
