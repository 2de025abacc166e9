#pragma once
// ChunkConfig: every [choice] of PATENTS.md section 3 (CN110955526B) as an explicit option,
// with the default named there. Passed by value into the chunk scheduler; never read globally.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace gpusched::chunks {

inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;

// CN110955526B step (10-6): a cached chunk whose GPU has no free stream goes to the GPU h with
// the most free streams. The claim checks neither h's streams nor its memory.
enum class MoveCheck {
  kWaitIfShort,  // default: WAIT when h has no free stream or not enough free memory
  kLiteral,      // go to h unchecked; the move then waits at h for a stream and memory
};

// CN110955526B steps (10-8)/(10-9): the claim "ends" when no GPU has a free stream with enough
// memory, leaving the subtask unexecuted.
enum class NoFitAction {
  kWait,         // default: requeue until a stream or memory is released
  kCpuFallback,  // run the kernel on the host CPU (the JVM fallback of a Spark executor)
};

// CN110955526B step (9): the claim names no formula for choosing the cache GPU.
enum class CacheRank {
  kLowestUsageRate,  // default: argmin (used/total, -free, id) among GPUs with enough memory
  kMostFreeMemory,   // argmax free memory, ties by lowest id
};

// CN110955526B step (7): how a task's buffer is cut into chunks.
enum class ChunkSplit {
  kFixedSize,       // default: chunks of `chunk_bytes` (the last one shorter)
  kEqualPerStream,  // GPUs x streams equal chunks
  // One chunk per GPU: ceil(input / GPUs), at least `min_chunk_bytes`, at most `chunk_bytes`
  // and at most what lets every stream of the smallest GPU hold one chunk subtask (the stage
  // runner's memory cap, splitter.h's SpreadMemoryCap), so an input smaller than GPUs x
  // chunk_bytes still reaches every GPU (the C ABI's default, issue 42), large inputs keep
  // chunk_bytes chunks, and small GPUs still take chunks.
  kSpreadOverGpus,
};

struct ChunkConfig {
  int64_t chunk_bytes = 64 * kMiB;  // CHUNK, default 64 MiB (kSpreadOverGpus: the largest chunk)
  int64_t min_chunk_bytes = kMiB;   // kSpreadOverGpus only: the smallest chunk worth a subtask
  int streams_per_gpu = 4;          // streams per GPU, default 4
  MoveCheck move_check = MoveCheck::kWaitIfShort;
  NoFitAction no_fit = NoFitAction::kWait;
  CacheRank cache_rank = CacheRank::kLowestUsageRate;
  ChunkSplit split = ChunkSplit::kFixedSize;
  // Not in the claims: how long a waiting subtask may wait while none of this scheduler's own
  // work is in flight (only other users of the GPUs could then release anything) before Run()
  // fails with ResourceExhausted. Measured on the injected Clock, retried every 1 ms.
  int64_t idle_wait_ms = 10'000;
  // CN110955526B claim 2: tasks go to an executor by free memory and free CPUs. `free_cpus` is
  // the node's CPUs free for this runner's tasks (0: no limit); each running task, on the GPU
  // executor or the CPU one, holds `task_cpus` of them (Spark's spark.task.cpus). Tasks beyond
  // the free CPUs run in a later wave of the stage.
  int free_cpus = 0;
  int task_cpus = 1;

  // Names the first bad field and its value, e.g. "chunk_bytes: must be > 0, got 0".
  Status Validate() const;
};

const char* MoveCheckName(MoveCheck m);
const char* NoFitActionName(NoFitAction a);
const char* CacheRankName(CacheRank r);

}  // namespace gpusched::chunks
