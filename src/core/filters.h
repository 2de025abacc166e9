#pragma once
// The node filters of the cluster pipeline (DESIGN.md step 3), in the order they run.
// CN115981827A: reachable (probe daemon, claim 9) -> GPU fit -> Kubernetes-style rules;
// CN109992422A: available (heartbeats, claims 5-6) and GPU memory fit (claim 1).
// A node is counted against the first filter that rejects it, so `why` can say
// "0/120 nodes fit: 80 insufficient GPU memory, 40 unreachable".
//
// Each filter is a small stateless class with a name (used in explanations and metrics) and
// an inline Passes(); they are called directly, not virtually, on the hot path.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/resources.h"

namespace gpusched::core {

// What one placement asks for, digested from a Task for fast filtering.
struct PlacementRequest {
  int64_t gpus = 0;
  MiB gpu_mem_mib = 0;  // per GPU; ignored when exclusive
  bool exclusive = false;  // whole GPUs: nothing else may hold them
  int model_id = -1;       // required GPU model, -1 = any
  Resources resources;
  const std::map<std::string, std::string>* node_selector = nullptr;
  const std::vector<Toleration>* tolerations = nullptr;
};

struct FilterOptions {
  // CN109992422A bookkeeping flag: free = min(reported free, accounted free).
  bool use_reported_free = false;
};

enum FilterId : int {
  kFilterReachable = 0,
  kFilterAvailable,
  kFilterSchedulable,
  kFilterTaintToleration,
  kFilterNodeSelector,
  kFilterCpuFit,
  kFilterMemoryFit,
  kFilterGpuModel,
  kFilterGpuCount,
  kFilterGpuMemory,
  kFilterGpuHealth,  // last so the ids of the others stay as they were
  kNumFilters,
};

// Filter name (as in metrics) and the phrase `why` uses for nodes it rejected.
const char* FilterName(int id);
const char* FilterReason(int id);

using FilterCounts = std::array<int64_t, kNumFilters>;

inline MiB EffectiveFree(const GpuState& g, const FilterOptions& o) {
  const MiB accounted = g.accounted_free();
  if (o.use_reported_free && g.reported_free_mib >= 0 && g.reported_free_mib < accounted) {
    return g.reported_free_mib;
  }
  return accounted;
}

// True when GPU `g` can take one share of `r`.
inline bool GpuFits(const GpuState& g, const PlacementRequest& r, const FilterOptions& o) {
  if (!g.healthy) return false;
  if (r.model_id >= 0 && g.model_id != r.model_id) return false;
  if (r.exclusive) return g.tasks == 0 && g.allocated_mib == 0;
  return EffectiveFree(g, o) >= r.gpu_mem_mib;
}

bool ToleratesAll(const std::vector<Taint>& taints, const std::vector<Toleration>* tolerations);
bool MatchesSelector(const std::map<std::string, std::string>& labels,
                     const std::map<std::string, std::string>* selector);

// Runs the filters in order; returns kNumFilters when the node passes all of them, else the
// id of the first filter that rejects it.
inline int FirstRejectingFilter(const NodeState& n, const PlacementRequest& r,
                                const FilterOptions& o) {
  if (!n.reachable) return kFilterReachable;
  if (!n.available) return kFilterAvailable;
  if (n.cordoned || n.draining) return kFilterSchedulable;
  if (!n.taints.empty() && !ToleratesAll(n.taints, r.tolerations)) return kFilterTaintToleration;
  if (r.node_selector != nullptr && !r.node_selector->empty() &&
      !MatchesSelector(n.labels, r.node_selector)) {
    return kFilterNodeSelector;
  }
  if (n.capacity.cpu_milli - n.allocated.cpu_milli < r.resources.cpu_milli) return kFilterCpuFit;
  if (n.capacity.mem_mib - n.allocated.mem_mib < r.resources.mem_mib) return kFilterMemoryFit;
  if (r.gpus == 0) return kNumFilters;
  if (static_cast<int64_t>(n.gpus.size()) < r.gpus) return kFilterGpuCount;
  int64_t model_matches = 0, healthy = 0, fits = 0;
  for (const GpuState& g : n.gpus) {
    if (r.model_id >= 0 && g.model_id != r.model_id) continue;
    ++model_matches;
    healthy += g.healthy ? 1 : 0;
    if (GpuFits(g, r, o) && ++fits >= r.gpus) return kNumFilters;
  }
  if (model_matches == 0) return kFilterGpuModel;
  if (model_matches < r.gpus) return kFilterGpuCount;
  if (healthy < r.gpus) return kFilterGpuHealth;
  return kFilterGpuMemory;
}

// The same answer as FirstRejectingFilter, from the compact summary where it suffices (no
// taints, selector or mixed GPU models; one GPU or whole GPUs), else from the full node.
inline int FirstRejectingFilterFast(const NodeSummary& s, const NodeState& n,
                                    const PlacementRequest& r, const FilterOptions& o) {
  const bool needs_full = (s.has_taints) ||
                          (r.node_selector != nullptr && !r.node_selector->empty()) ||
                          o.use_reported_free || (r.gpus > 1 && !r.exclusive) ||
                          (r.gpus > 0 && s.model_id < 0 && s.gpu_count > 0) ||
                          (r.gpus > 0 && s.unhealthy_gpus > 0);
  if (!s.schedulable || needs_full) return FirstRejectingFilter(n, r, o);
  if (s.cpu_free < r.resources.cpu_milli) return kFilterCpuFit;
  if (s.mem_free < r.resources.mem_mib) return kFilterMemoryFit;
  if (r.gpus == 0) return kNumFilters;
  if (s.gpu_count < r.gpus) return kFilterGpuCount;
  if (r.model_id >= 0 && s.model_id != r.model_id) return kFilterGpuModel;
  if (r.exclusive) return s.whole_free_gpus >= r.gpus ? kNumFilters : kFilterGpuMemory;
  return s.max_gpu_free_mib >= r.gpu_mem_mib ? kNumFilters : kFilterGpuMemory;
}

}  // namespace gpusched::core
