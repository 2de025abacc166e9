#include "core/scorers.h"

#include <cmath>

namespace gpusched::core {

ScoreInputs ScoreInputsOf(const NodeState& n) {
  return {n.allocated.cpu_milli, n.allocated.mem_mib, n.gpu_allocated_mib, n.max_gpu_total_mib,
          static_cast<int32_t>(n.gpus.size()), n.running_tasks, n.inv_cpu, n.inv_mem,
          n.inv_gpu_mem};
}

ScoreInputs ScoreInputsOf(const NodeSummary& s) {
  return {s.cpu_alloc, s.mem_alloc, s.gpu_alloc_mib, s.max_gpu_total_mib, s.gpu_count,
          s.running_tasks, s.inv_cpu, s.inv_mem, s.inv_gpu_mem};
}

double LeastAllocatedValue(const ScoreContext& c) {
  return LeastAllocatedFromFractions(c.fractions, c.kinds);
}

double BalancedAllocationValue(const ScoreContext& c) {
  return BalancedAllocationFromFractions(c.fractions, c.kinds);
}

double ServerLoadValue(const ScoreContext& c) { return 100.0 / (1.0 + c.in.running_tasks); }

double GpuBestFitValue(const ScoreContext& c) {
  const MiB used = c.in.gpu_alloc_mib + RequestedGpuMib(c.in, c.request);
  return std::min(1.0, static_cast<double>(used) * c.in.inv_gpu_mem) * 100.0;
}

std::array<double, kNumScorers> ScorerValues(const ScoreInputs& in, const PlacementRequest& r) {
  ScoreContext c{in, r};
  c.kinds = FractionsOf(in, r, c.fractions);
  std::array<double, kNumScorers> v{};
  for (const ScorerDef& s : kScorers) v[static_cast<size_t>(s.id)] = s.value(c);
  return v;
}

int UsedFractions(const NodeState& n, const PlacementRequest& r, double out[3]) {
  return FractionsOf(ScoreInputsOf(n), r, out);
}

double LeastAllocatedFromFractions(const double f[3], int k) {
  if (k == 0) return 0;
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += (1.0 - f[i]) * 100.0;
  return sum / k;
}

double SpreadOfFractions(const double* f, int k) {
  if (k <= 1) return 0;
  double mean = 0;
  for (int i = 0; i < k; ++i) mean += f[i];
  mean /= k;
  double var = 0;
  for (int i = 0; i < k; ++i) var += (f[i] - mean) * (f[i] - mean);
  return std::sqrt(var / k);
}

double BalancedAllocationFromFractions(const double f[3], int k) {
  if (k <= 1) return 100.0;
  return (1.0 - SpreadOfFractions(f, k)) * 100.0;
}

const char* ScorerName(int id) {
  return id >= 0 && id < kNumScorers ? kScorers[static_cast<size_t>(id)].name : "none";
}

double LeastAllocatedScore(const NodeState& n, const PlacementRequest& r) {
  return ScorerValue(kScorerLeastAllocated, n, r);
}

double BalancedAllocationScore(const NodeState& n, const PlacementRequest& r) {
  return ScorerValue(kScorerBalancedAllocation, n, r);
}

double ServerLoadScore(const NodeState& n) { return 100.0 / (1.0 + n.running_tasks); }

double GpuBestFitScore(const NodeState& n, const PlacementRequest& r) {
  return ScorerValue(kScorerGpuBestFit, n, r);
}

namespace {

// Σ weight × value / Σ weight over the plugins with a weight, in ScorerId order.
double Weighted(const ScoreWeights& w, const std::array<double, kNumScorers>& values) {
  double sum = 0, weights = 0;
  for (int id = 0; id < kNumScorers; ++id) {
    if (w.weight[id] == 0) continue;
    sum += w.weight[id] * values[id];
    weights += w.weight[id];
  }
  return weights > 0 ? sum / weights : 0.0;
}

}  // namespace

bool OnlyDefaultPluginsWeighted(const ScoreWeights& w) {
  for (int id = 0; id < kNumScorers; ++id) {
    if (id != kScorerLeastAllocated && id != kScorerBalancedAllocation && w.weight[id] != 0) {
      return false;
    }
  }
  return true;
}

double WeightedScoreFast(const ScoreWeights& w, const NodeSummary& s, const PlacementRequest& r) {
  return WeightedScoreFast(w, ScoreInputsOf(s), r);
}

double WeightedScoreFast(const ScoreWeights& w, const ScoreInputs& in, const PlacementRequest& r) {
  if (HasAllKinds(in) && OnlyDefaultPluginsWeighted(w)) {
    return DefaultPluginsScore(in, r, w.weight[kScorerLeastAllocated],
                               w.weight[kScorerBalancedAllocation]);
  }
  return Weighted(w, ScorerValues(in, r));
}

double WeightedScore(const ScoreWeights& w, const NodeState& n, const PlacementRequest& r) {
  return Weighted(w, ScorerValues(ScoreInputsOf(n), r));
}

double ScorerValue(int id, const NodeState& n, const PlacementRequest& r) {
  if (id < 0 || id >= kNumScorers) return 0;
  return ScorerValues(ScoreInputsOf(n), r)[static_cast<size_t>(id)];
}

}  // namespace gpusched::core
