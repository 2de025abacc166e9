#include "core/scorers.h"

#include <cmath>

namespace gpusched::core {
namespace {

// GPU memory this request takes on node n (whole GPUs count their full size).
MiB RequestedGpuMib(const NodeState& n, const PlacementRequest& r) {
  if (r.gpus == 0) return 0;
  if (r.exclusive) {
    return n.gpus.empty() ? 0 : r.gpus * n.max_gpu_total_mib;
  }
  return r.gpus * r.gpu_mem_mib;
}

// Fills up to three "used fraction after placement" values; returns how many.
}  // namespace

int UsedFractions(const NodeState& n, const PlacementRequest& r, double out[3]) {
  int k = 0;
  if (n.inv_cpu > 0) {
    out[k++] = static_cast<double>(n.allocated.cpu_milli + r.resources.cpu_milli) * n.inv_cpu;
  }
  if (n.inv_mem > 0) {
    out[k++] = static_cast<double>(n.allocated.mem_mib + r.resources.mem_mib) * n.inv_mem;
  }
  if (n.inv_gpu_mem > 0) {
    out[k++] = static_cast<double>(n.gpu_allocated_mib + RequestedGpuMib(n, r)) * n.inv_gpu_mem;
  }
  for (int i = 0; i < k; ++i) out[i] = std::min(1.0, std::max(0.0, out[i]));
  return k;
}

double LeastAllocatedFromFractions(const double f[3], int k) {
  if (k == 0) return 0;
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += (1.0 - f[i]) * 100.0;
  return sum / k;
}

double BalancedAllocationFromFractions(const double f[3], int k) {
  if (k <= 1) return 100.0;
  double mean = 0;
  for (int i = 0; i < k; ++i) mean += f[i];
  mean /= k;
  double var = 0;
  for (int i = 0; i < k; ++i) var += (f[i] - mean) * (f[i] - mean);
  return (1.0 - std::sqrt(var / k)) * 100.0;
}

const char* ScorerName(int id) {
  static constexpr const char* kNames[kNumScorers] = {"LeastAllocated", "BalancedAllocation",
                                                      "ServerLoad", "GpuBestFit"};
  return id >= 0 && id < kNumScorers ? kNames[id] : "none";
}

double LeastAllocatedScore(const NodeState& n, const PlacementRequest& r) {
  double f[3];
  return LeastAllocatedFromFractions(f, UsedFractions(n, r, f));
}

double BalancedAllocationScore(const NodeState& n, const PlacementRequest& r) {
  double f[3];
  return BalancedAllocationFromFractions(f, UsedFractions(n, r, f));
}

double ServerLoadScore(const NodeState& n) { return 100.0 / (1.0 + n.running_tasks); }

double GpuBestFitScore(const NodeState& n, const PlacementRequest& r) {
  return std::min(1.0, static_cast<double>(n.gpu_allocated_mib + RequestedGpuMib(n, r)) *
                           n.inv_gpu_mem) *
         100.0;
}

double WeightedScoreFast(const ScoreWeights& w, const NodeSummary& s, const PlacementRequest& r) {
  double f[3];
  int k = 0;
  if (s.inv_cpu > 0) f[k++] = static_cast<double>(s.cpu_alloc + r.resources.cpu_milli) * s.inv_cpu;
  if (s.inv_mem > 0) f[k++] = static_cast<double>(s.mem_alloc + r.resources.mem_mib) * s.inv_mem;
  const MiB gpu_req = r.gpus == 0 ? 0
                      : r.exclusive ? (s.gpu_count == 0 ? 0 : r.gpus * s.max_gpu_total_mib)
                                    : r.gpus * r.gpu_mem_mib;
  if (s.inv_gpu_mem > 0) f[k++] = static_cast<double>(s.gpu_alloc_mib + gpu_req) * s.inv_gpu_mem;
  for (int i = 0; i < k; ++i) f[i] = std::min(1.0, std::max(0.0, f[i]));
  if (k == 3 && w.weight[kScorerServerLoad] == 0 && w.weight[kScorerGpuBestFit] == 0) {
    // The default plugins on a node with CPU, RAM and GPUs: the hot case, without branches.
    const double mean = (f[0] + f[1] + f[2]) * (1.0 / 3.0);
    const double d0 = f[0] - mean, d1 = f[1] - mean, d2 = f[2] - mean;
    const double least = (1.0 - mean) * 100.0;
    const double balanced = (1.0 - std::sqrt((d0 * d0 + d1 * d1 + d2 * d2) * (1.0 / 3.0))) * 100.0;
    const double wl = w.weight[kScorerLeastAllocated], wb = w.weight[kScorerBalancedAllocation];
    return wl + wb > 0 ? (wl * least + wb * balanced) / (wl + wb) : 0.0;
  }
  double sum = 0, weights = 0;
  const auto add = [&](int id, double value) {
    if (w.weight[id] == 0) return;
    sum += w.weight[id] * value;
    weights += w.weight[id];
  };
  add(kScorerLeastAllocated, LeastAllocatedFromFractions(f, k));
  add(kScorerBalancedAllocation, BalancedAllocationFromFractions(f, k));
  add(kScorerServerLoad, 100.0 / (1.0 + s.running_tasks));
  if (w.weight[kScorerGpuBestFit] != 0) {
    add(kScorerGpuBestFit, std::min(1.0, static_cast<double>(s.gpu_alloc_mib + gpu_req) *
                                             s.inv_gpu_mem) * 100.0);
  }
  return weights > 0 ? sum / weights : 0.0;
}

double WeightedScore(const ScoreWeights& w, const NodeState& n, const PlacementRequest& r) {
  double f[3];
  const int k = UsedFractions(n, r, f);  // shared by the two default plugins
  double sum = 0, weights = 0;
  if (w.weight[kScorerLeastAllocated] != 0) {
    sum += w.weight[kScorerLeastAllocated] * LeastAllocatedFromFractions(f, k);
    weights += w.weight[kScorerLeastAllocated];
  }
  if (w.weight[kScorerBalancedAllocation] != 0) {
    sum += w.weight[kScorerBalancedAllocation] * BalancedAllocationFromFractions(f, k);
    weights += w.weight[kScorerBalancedAllocation];
  }
  if (w.weight[kScorerServerLoad] != 0) {
    sum += w.weight[kScorerServerLoad] * ServerLoadScore(n);
    weights += w.weight[kScorerServerLoad];
  }
  if (w.weight[kScorerGpuBestFit] != 0) {
    sum += w.weight[kScorerGpuBestFit] * GpuBestFitScore(n, r);
    weights += w.weight[kScorerGpuBestFit];
  }
  return weights > 0 ? sum / weights : 0.0;
}

double ScorerValue(int id, const NodeState& n, const PlacementRequest& r) {
  switch (id) {
    case kScorerLeastAllocated: return LeastAllocatedScore(n, r);
    case kScorerBalancedAllocation: return BalancedAllocationScore(n, r);
    case kScorerServerLoad: return ServerLoadScore(n);
    case kScorerGpuBestFit: return GpuBestFitScore(n, r);
    default: return 0;
  }
}

}  // namespace gpusched::core
