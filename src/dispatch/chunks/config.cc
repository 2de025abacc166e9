#include "dispatch/chunks/config.h"

namespace gpusched::chunks {

Status ChunkConfig::Validate() const {
  if (chunk_bytes <= 0) {
    return InvalidArgument("chunk_bytes: must be > 0, got " + std::to_string(chunk_bytes));
  }
  if (min_chunk_bytes <= 0) {
    return InvalidArgument("min_chunk_bytes: must be > 0, got " + std::to_string(min_chunk_bytes));
  }
  if (streams_per_gpu <= 0) {
    return InvalidArgument("streams_per_gpu: must be > 0, got " + std::to_string(streams_per_gpu));
  }
  if (idle_wait_ms < 0) {
    return InvalidArgument("idle_wait_ms: must be >= 0, got " + std::to_string(idle_wait_ms));
  }
  if (free_cpus < 0) return InvalidArgument("free_cpus: must be >= 0 (0: no limit), got " + std::to_string(free_cpus));
  if (task_cpus < 1) return InvalidArgument("task_cpus: must be >= 1, got " + std::to_string(task_cpus));
  if (free_cpus != 0 && free_cpus < task_cpus) {
    return InvalidArgument("free_cpus: must be 0 or >= task_cpus (" + std::to_string(task_cpus) +
                           "), got " + std::to_string(free_cpus));
  }
  return Status::Ok();
}

const char* MoveCheckName(MoveCheck m) {
  return m == MoveCheck::kWaitIfShort ? "wait-if-short" : "literal";
}
const char* NoFitActionName(NoFitAction a) {
  return a == NoFitAction::kWait ? "wait" : "cpu-fallback";
}
const char* CacheRankName(CacheRank r) {
  return r == CacheRank::kLowestUsageRate ? "lowest-usage-rate" : "most-free-memory";
}

}  // namespace gpusched::chunks
