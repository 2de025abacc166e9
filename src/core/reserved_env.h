#pragma once
// Environment names the product owns. Every name starting with GPUSCHED_ is gpusched's: the
// CLI reads its settings from some (GPUSCHED_TOKEN, GPUSCHED_SERVER, ...), the agent and the
// shim give a task others (GPUSCHED_TASK_ID, GPUSCHED_ARRAY_INDEX, ...). A submission that
// carries one is refused at the front door (issues 35 and 36), and `--export=ALL` never sends
// one.
//
// Pure: no I/O, no state.

#include <string_view>

namespace gpusched::core {

inline constexpr std::string_view kReservedEnvPrefix = "GPUSCHED_";

// Whether `name` is one of gpusched's own (starts with GPUSCHED_, case-sensitive as the
// environment is).
bool IsReservedEnvName(std::string_view name);

}  // namespace gpusched::core
