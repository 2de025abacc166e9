#include "dispatch/chunks/placement.h"

#include <algorithm>

namespace gpusched::chunks {
namespace {

__extension__ typedef __int128 Wide;  // used*total products of byte counts overflow int64

// True when a's memory usage rate (used/total) is lower than b's. A GPU with total 0 counts
// as fully used.
bool LowerUsageRate(const GpuView& a, const GpuView& b) {
  const Wide used_a = a.total_bytes - a.free_bytes, used_b = b.total_bytes - b.free_bytes;
  if (a.total_bytes <= 0 || b.total_bytes <= 0) return a.total_bytes > 0 && b.total_bytes <= 0;
  return used_a * b.total_bytes < used_b * a.total_bytes;
}

bool SameUsageRate(const GpuView& a, const GpuView& b) {
  return !LowerUsageRate(a, b) && !LowerUsageRate(b, a);
}

// Step (9) ordering: "a is the better cache GPU than b".
bool BetterCacheGpu(const GpuView& a, const GpuView& b, CacheRank rank) {
  if (rank == CacheRank::kLowestUsageRate && !SameUsageRate(a, b)) return LowerUsageRate(a, b);
  if (a.free_bytes != b.free_bytes) return a.free_bytes > b.free_bytes;
  return a.gpu < b.gpu;
}

const GpuView* FindGpu(std::span<const GpuView> gpus, int gpu) {
  for (const GpuView& g : gpus) {
    if (g.gpu == gpu) return &g;
  }
  return nullptr;
}

StreamDecision NoFit(std::string reason, const ChunkConfig& config) {
  // CN110955526B steps (10-8)/(10-9): the claim ends here; [choice] wait or CPU fallback.
  if (config.no_fit == NoFitAction::kCpuFallback) return RunOnCpu{std::move(reason)};
  return Wait{std::move(reason)};
}

}  // namespace

CacheDecision PlaceCache(std::span<const GpuView> gpus, int64_t bytes, const ChunkConfig& config) {
  // CN110955526B step (9): C = {g : g.free >= size}; empty C keeps the chunk in host memory.
  const GpuView* best = nullptr;
  for (const GpuView& g : gpus) {
    if (g.free_bytes < bytes) continue;
    if (best == nullptr || BetterCacheGpu(g, *best, config.cache_rank)) best = &g;
  }
  if (best == nullptr) return KeepInHost{};
  return CacheOnGpu{best->gpu};
}

std::vector<GpuView> SortByFreeStreams(std::vector<GpuView> gpus) {
  // CN110955526B step (10-2): stable sort by free streams, descending, over id order.
  std::sort(gpus.begin(), gpus.end(), [](const GpuView& a, const GpuView& b) { return a.gpu < b.gpu; });
  std::stable_sort(gpus.begin(), gpus.end(), [](const GpuView& a, const GpuView& b) {
    return a.free_streams > b.free_streams;
  });
  return gpus;
}

StreamDecision PlaceStream(std::span<const GpuView> gpus, const CacheMap& cache_map,
                           const ChunkKey& chunk, int64_t bytes, const ChunkConfig& config) {
  // CN110955526B step (10-1): the memory and stream lists are `gpus` itself.
  const std::vector<GpuView> str = SortByFreeStreams({gpus.begin(), gpus.end()});  // (10-2)
  if (str.empty()) return NoFit("no GPUs", config);

  // CN110955526B step (10-3): is the chunk cached on a GPU?
  if (auto it = cache_map.find(chunk); it != cache_map.end()) {
    const GpuView* g = FindGpu(gpus, it->second);  // (10-4)
    // CN110955526B step (10-5): locality wins whenever the caching GPU has a free stream.
    if (g != nullptr && g->free_streams > 0) return RunOnCachedGpu{g->gpu};
    // CN110955526B step (10-6): go to the GPU with the most free streams.
    const GpuView& h = str.front();
    if (config.move_check == MoveCheck::kWaitIfShort) {
      if (h.free_streams <= 0) return Wait{"cached GPU busy and no GPU has a free stream"};
      if (h.free_bytes < bytes) {
        return Wait{"cached GPU busy and GPU " + std::to_string(h.gpu) + " lacks memory"};
      }
    }
    return MoveToGpu{it->second, h.gpu};
  }

  // CN110955526B steps (10-7)..(10-12): first GPU in stream order with a stream and memory.
  for (const GpuView& g : str) {
    if (g.free_streams <= 0) return NoFit("no GPU has a free stream", config);  // (10-9)
    if (g.free_bytes >= bytes) return StreamOnGpu{g.gpu};                       // (10-10,11)
  }
  return NoFit("no GPU with a free stream has enough free memory", config);      // (10-8)
}

StreamDecision PlaceRoundRobin(std::span<const GpuView> gpus, const CacheMap& cache_map,
                               const ChunkKey& chunk, int64_t bytes, uint64_t next) {
  if (gpus.empty()) return Wait{"no GPUs"};
  std::vector<GpuView> by_id(gpus.begin(), gpus.end());
  std::sort(by_id.begin(), by_id.end(), [](const GpuView& a, const GpuView& b) { return a.gpu < b.gpu; });
  const GpuView& g = by_id[next % by_id.size()];
  if (g.free_streams <= 0) return Wait{"round-robin GPU " + std::to_string(g.gpu) + " has no free stream"};
  if (auto it = cache_map.find(chunk); it != cache_map.end() && it->second == g.gpu) {
    return RunOnCachedGpu{g.gpu};
  }
  if (g.free_bytes < bytes) return Wait{"round-robin GPU " + std::to_string(g.gpu) + " lacks memory"};
  return StreamOnGpu{g.gpu};
}

std::string DescribeDecision(const CacheDecision& d) {
  if (const auto* c = std::get_if<CacheOnGpu>(&d)) return "cache g" + std::to_string(c->gpu);
  return "keep-in-host";
}

std::string DescribeDecision(const StreamDecision& d) {
  struct Visitor {
    std::string operator()(const RunOnCachedGpu& r) { return "run-cached g" + std::to_string(r.gpu); }
    std::string operator()(const MoveToGpu& m) {
      return "move g" + std::to_string(m.from_gpu) + "->g" + std::to_string(m.to_gpu);
    }
    std::string operator()(const StreamOnGpu& s) { return "stream g" + std::to_string(s.gpu); }
    std::string operator()(const Wait& w) { return "wait (" + w.reason + ")"; }
    std::string operator()(const RunOnCpu& c) { return "cpu (" + c.reason + ")"; }
  };
  return std::visit(Visitor{}, d);
}

}  // namespace gpusched::chunks
