#pragma once
// Validation of a TaskSpec at the front door. Every error names the field and the value,
// e.g. `gpu_mem: must be >= 0, got -5MiB`, so a user can fix the spec without reading code.

#include "base/status.h"
#include "core/task.h"

namespace gpusched::core {

// Upper bounds that catch typos ("absurd" sizes) rather than express policy.
inline constexpr int64_t kMaxGpusPerTask = 4096;
inline constexpr int64_t kMaxGangNodes = 4096;                 // TaskSpec::nodes
inline constexpr MiB kMaxGpuMemMib = 16LL * 1024 * 1024;       // 16 TiB per GPU
inline constexpr int64_t kMaxCpuMilli = 100'000'000;          // 100k cores
inline constexpr MiB kMaxMemMib = 1024LL * 1024 * 1024;        // 1 PiB
inline constexpr DurationMs kMaxDurationMs = 366LL * 86'400'000;  // a year
inline constexpr int64_t kMaxRetries = 1000;
inline constexpr size_t kMaxNameLength = 253;

Status ValidateTaskSpec(const TaskSpec& spec);

// The front door's check of what a user submits (not of what the server adds later, such as
// GPUSCHED_ARRAY_INDEX): InvalidArgument naming the first variable whose name is reserved
// (core/reserved_env.h), e.g. `env: GPUSCHED_TOKEN is reserved for gpusched (...)`.
Status CheckSubmittedEnv(const TaskSpec& spec);

}  // namespace gpusched::core
