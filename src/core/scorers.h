#pragma once
// Node score plugins (DESIGN.md step 4), each in [0, 100], higher is better, computed as if
// the task were already placed on the node. The weighted sum over plugins, divided by the sum
// of weights, ranks feasible nodes; ties go to the lowest node name.
//
// Defaults ([choice], PATENTS.md section 4 k8s_select): the mean of LeastAllocated and
// BalancedAllocation. ServerLoad is CN109992422A's first preset principle as a score;
// GpuBestFit packs GPU memory (useful to keep whole GPUs free).
//
// kScorers holds one row per plugin, in id order: its name (`why`'s breakdown, metrics), its
// key in the server config's `score_weights:`, its default weight and its function, which
// reads a ScoreContext (the node's ScoreInputs, the request, and the used fractions after
// placement, computed once per node). One formula per plugin serves both the ranking (from
// the node summaries) and `why` (from the nodes), so the score that ranks is the score `why`
// explains (issue 40). Adding a plugin is an id before kNumScorers, its function, and one row:
//   double TopologyValue(const ScoreContext& c);  // defined in scorers.cc
//   {kScorerTopology, "Topology", "topology", 0.0, TopologyValue},
// (WeightedScoreFast's inline path covers the default plugins only; a weight on any other
// plugin takes the table's path.)

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/filters.h"
#include "core/node.h"

namespace gpusched::core {

// Stable ids: the index of ScoreWeights::weight and of ScorerValues.
enum ScorerId : int {
  kScorerLeastAllocated = 0,
  kScorerBalancedAllocation,
  kScorerServerLoad,
  kScorerGpuBestFit,
  kNumScorers,
};

// What the scorers read of a node, taken from the node (explanations) or from its summary
// (ranking).
struct ScoreInputs {
  int64_t cpu_alloc = 0, mem_alloc = 0;
  MiB gpu_alloc_mib = 0, max_gpu_total_mib = 0;
  int32_t gpu_count = 0, running_tasks = 0;
  double inv_cpu = 0, inv_mem = 0, inv_gpu_mem = 0;
  bool operator==(const ScoreInputs&) const = default;
};
ScoreInputs ScoreInputsOf(const NodeState& n);
ScoreInputs ScoreInputsOf(const NodeSummary& s);

// GPU memory this request takes on the node (whole GPUs count their full size).
inline MiB RequestedGpuMib(const ScoreInputs& in, const PlacementRequest& r) {
  if (r.gpus == 0) return 0;
  if (r.exclusive) return in.gpu_count == 0 ? 0 : r.gpus * in.max_gpu_total_mib;
  return r.gpus * r.gpu_mem_mib;
}

// Up to three "used fraction after placement" values (CPU, RAM, GPU memory, those the node
// has), clamped to [0, 1]; returns how many.
inline int FractionsOf(const ScoreInputs& in, const PlacementRequest& r, double out[3]) {
  int k = 0;
  if (in.inv_cpu > 0) out[k++] = static_cast<double>(in.cpu_alloc + r.resources.cpu_milli) * in.inv_cpu;
  if (in.inv_mem > 0) out[k++] = static_cast<double>(in.mem_alloc + r.resources.mem_mib) * in.inv_mem;
  if (in.inv_gpu_mem > 0) {
    out[k++] = static_cast<double>(in.gpu_alloc_mib + RequestedGpuMib(in, r)) * in.inv_gpu_mem;
  }
  for (int i = 0; i < k; ++i) out[i] = std::min(1.0, std::max(0.0, out[i]));
  return k;
}

// Whether the node has CPU, RAM and GPU memory (DefaultPluginsScore's case).
inline bool HasAllKinds(const ScoreInputs& in) {
  return in.inv_cpu > 0 && in.inv_mem > 0 && in.inv_gpu_mem > 0;
}

// The default plugins, LeastAllocated and BalancedAllocation weighted wl and wb, on a node with
// all three kinds: WeightedScoreFast's hot path, inline here so the node index's walk
// (placement_index.cc) scores a class as the scan scores its nodes.
[[gnu::always_inline]] inline double DefaultPluginsScore(const ScoreInputs& in,
                                                        const PlacementRequest& r, double wl,
                                                        double wb) {
  double f[3];
  FractionsOf(in, r, f);
  const double mean = (f[0] + f[1] + f[2]) * (1.0 / 3.0);
  const double d0 = f[0] - mean, d1 = f[1] - mean, d2 = f[2] - mean;
  const double least = (1.0 - mean) * 100.0;
  const double balanced = (1.0 - std::sqrt((d0 * d0 + d1 * d1 + d2 * d2) * (1.0 / 3.0))) * 100.0;
  return wl + wb > 0 ? (wl * least + wb * balanced) / (wl + wb) : 0.0;
}

// One node and one request: what a plugin reads. `fractions` are the used fractions of CPU,
// RAM and GPU memory after placement, clamped to [0, 1], for the `kinds` of them the node has.
struct ScoreContext {
  const ScoreInputs& in;
  const PlacementRequest& request;
  double fractions[3] = {0, 0, 0};
  int kinds = 0;
};

// The plugins' functions.
// Σ_r (capacity - allocated - request) / capacity × 100 / |r| over CPU, RAM and GPU memory,
// skipping resources the node does not have.
double LeastAllocatedValue(const ScoreContext& c);
// (1 - standard deviation of the CPU, RAM and GPU-memory fractions after placement) × 100.
double BalancedAllocationValue(const ScoreContext& c);
// 100 / (1 + tasks already on the node).
double ServerLoadValue(const ScoreContext& c);
// GPU-memory fraction after placement × 100.
double GpuBestFitValue(const ScoreContext& c);

struct ScorerDef {
  ScorerId id;
  const char* name;        // as in `why`'s breakdown and metrics
  const char* config_key;  // in the server config's `score_weights:`
  double default_weight;
  double (*value)(const ScoreContext&);  // in [0, 100], higher is better
};

// The plugins, in id order (the order of the weighted sum).
inline constexpr std::array<ScorerDef, kNumScorers> kScorers = {{
    {kScorerLeastAllocated, "LeastAllocated", "least_allocated", 1.0, LeastAllocatedValue},
    {kScorerBalancedAllocation, "BalancedAllocation", "balanced_allocation", 1.0,
     BalancedAllocationValue},
    {kScorerServerLoad, "ServerLoad", "server_load", 0.0, ServerLoadValue},
    {kScorerGpuBestFit, "GpuBestFit", "gpu_best_fit", 0.0, GpuBestFitValue},
}};

constexpr bool ScorersInIdOrder() {
  for (size_t i = 0; i < kScorers.size(); ++i) {
    if (kScorers[i].id != static_cast<int>(i)) return false;
  }
  return true;
}
static_assert(ScorersInIdOrder(), "kScorers must list every ScorerId, in id order");

const char* ScorerName(int id);

struct ScoreWeights {
  std::array<double, kNumScorers> weight = [] {
    std::array<double, kNumScorers> w{};
    for (const ScorerDef& s : kScorers) w[static_cast<size_t>(s.id)] = s.default_weight;
    return w;
  }();
};

double LeastAllocatedScore(const NodeState& n, const PlacementRequest& r);
double BalancedAllocationScore(const NodeState& n, const PlacementRequest& r);
double ServerLoadScore(const NodeState& n);
double GpuBestFitScore(const NodeState& n, const PlacementRequest& r);

// Every plugin's value for `r` on the node, indexed by ScorerId.
std::array<double, kNumScorers> ScorerValues(const ScoreInputs& in, const PlacementRequest& r);

double ScorerValue(int id, const NodeState& n, const PlacementRequest& r);
// Σ weight × plugin / Σ weight, computing the shared used-fractions once.
double WeightedScore(const ScoreWeights& w, const NodeState& n, const PlacementRequest& r);

// WeightedScore from the compact summary: ScorerValues weighted, except the default plugins
// on a node with CPU, RAM and GPUs, computed inline (the hot case; scorers_test checks that
// it agrees with ScorerValue over random nodes).
double WeightedScoreFast(const ScoreWeights& w, const NodeSummary& s, const PlacementRequest& r);
// The same from the inputs (ScoreInputsOf(s) gives what the summary form computes with).
double WeightedScoreFast(const ScoreWeights& w, const ScoreInputs& in, const PlacementRequest& r);
// True when no plugin but LeastAllocated and BalancedAllocation has a weight: the case
// WeightedScoreFast computes inline (DefaultPluginsScore).
bool OnlyDefaultPluginsWeighted(const ScoreWeights& w);

// Used fractions of CPU, RAM and GPU memory after placement, clamped to [0, 1]; returns how
// many of the three the node has.
int UsedFractions(const NodeState& n, const PlacementRequest& r, double out[3]);
double LeastAllocatedFromFractions(const double f[3], int k);
double BalancedAllocationFromFractions(const double f[3], int k);
// The population standard deviation of f[0..k) (0 for k <= 1).
double SpreadOfFractions(const double* f, int k);

}  // namespace gpusched::core
