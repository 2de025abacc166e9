#pragma once
// The placement policies of CN110955526B steps (9) and (10) as pure functions over a snapshot
// of per-GPU state. They decide; they allocate nothing. The scheduler (chunk_scheduler.h)
// takes the snapshot, calls them under its lock, and commits the decision.
//
// "Cannot place now" is a result (Wait), not an error. Every tie is broken by the lowest GPU id.

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "dispatch/chunks/config.h"

namespace gpusched::chunks {

// Identifies one chunk of one host buffer: the key of the cache map.
struct ChunkKey {
  uint64_t buffer_id = 0;
  int64_t index = 0;
  auto operator<=>(const ChunkKey&) const = default;
};

// One GPU as the policies see it. Bytes throughout.
struct GpuView {
  int gpu = 0;
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;  // used = total - free
  int free_streams = 0;
};

// Chunk -> GPU holding its cached copy (CN110955526B step 9's cache_map).
using CacheMap = std::map<ChunkKey, int>;

// ---- Step (9): CACHE subtasks ----
struct CacheOnGpu {  // copy the chunk to `gpu` and record it in the cache map
  int gpu;
  bool operator==(const CacheOnGpu&) const = default;
};
struct KeepInHost {  // no GPU has room: the chunk stays uncached in host memory
  bool operator==(const KeepInHost&) const = default;
};
using CacheDecision = std::variant<CacheOnGpu, KeepInHost>;

// CN110955526B step (9). `gpus` in any order; `bytes` is the chunk's size.
CacheDecision PlaceCache(std::span<const GpuView> gpus, int64_t bytes, const ChunkConfig& config);

// ---- Step (10): STREAM subtasks ----
struct RunOnCachedGpu {  // (10-5): stream on the GPU that caches the chunk; no copy
  int gpu;
  bool operator==(const RunOnCachedGpu&) const = default;
};
struct MoveToGpu {  // (10-6): the caching GPU has no free stream; move the data to `to_gpu`
  int from_gpu;
  int to_gpu;
  bool operator==(const MoveToGpu&) const = default;
};
struct StreamOnGpu {  // (10-10)/(10-11): uncached chunk, stream and memory on `gpu`
  int gpu;
  bool operator==(const StreamOnGpu&) const = default;
};
struct Wait {  // (10-6) short of streams/memory, or the (10-8)/(10-9) "end": requeue
  std::string reason;
  bool operator==(const Wait&) const = default;
};
struct RunOnCpu {  // NoFitAction::kCpuFallback at (10-8)/(10-9)
  std::string reason;
  bool operator==(const RunOnCpu&) const = default;
};
using StreamDecision = std::variant<RunOnCachedGpu, MoveToGpu, StreamOnGpu, Wait, RunOnCpu>;

// CN110955526B step (10-2): GPUs by free streams, most first; equal counts keep id order.
std::vector<GpuView> SortByFreeStreams(std::vector<GpuView> gpus);

// CN110955526B step (10). `chunk` is looked up in `cache_map` (10-3); `bytes` is the device
// memory the subtask needs when its chunk is not already on the GPU (the chunk, any second
// input and the output).
StreamDecision PlaceStream(std::span<const GpuView> gpus, const CacheMap& cache_map,
                           const ChunkKey& chunk, int64_t bytes, const ChunkConfig& config);

// The locality-blind baseline of `gpusched bench chunks` (not the patent): GPU
// `next % gpus.size()` in id order if it has a free stream and `bytes` free, else Wait.
// A chunk that happens to be cached on that GPU runs there without a copy.
StreamDecision PlaceRoundRobin(std::span<const GpuView> gpus, const CacheMap& cache_map,
                               const ChunkKey& chunk, int64_t bytes, uint64_t next);

// "cache g1", "keep-in-host", "run-cached g2", "move g0->g1", "stream g2", "wait (...)".
std::string DescribeDecision(const CacheDecision& d);
std::string DescribeDecision(const StreamDecision& d);

}  // namespace gpusched::chunks
