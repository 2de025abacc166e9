#pragma once
// Environment names the product owns. Every name starting with GPUSCHED_ is gpusched's: the
// CLI reads its settings from some (GPUSCHED_TOKEN, GPUSCHED_SERVER, ...), the agent and the
// shim give a task others (GPUSCHED_TASK_ID, GPUSCHED_ARRAY_INDEX, ...). A task's environment
// is data, never control: a submission that carries one of these names is refused at the
// front door, `--export=ALL` never sends one, and the agent drops whatever a task put under
// them before it sets the values the product defines (issues 35 and 36).
//
// Pure: no I/O, no state.

#include <string_view>

namespace gpusched::core {

inline constexpr std::string_view kReservedEnvPrefix = "GPUSCHED_";

// Whether `name` is one of gpusched's own (starts with GPUSCHED_, case-sensitive as the
// environment is).
bool IsReservedEnvName(std::string_view name);

// True for the reserved names the server itself sets in a task's environment (an array's
// index, a gang's node list, the processes per node), which the agent passes on from the
// assignment. REQUIRES for their trust: the server refuses reserved names at submission.
bool IsServerSetEnvName(std::string_view name);

}  // namespace gpusched::core
