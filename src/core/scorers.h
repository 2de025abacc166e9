#pragma once
// Node score plugins (DESIGN.md step 4), each in [0, 100], higher is better, computed as if
// the task were already placed on the node. The weighted sum over plugins, divided by the sum
// of weights, ranks feasible nodes; ties go to the lowest node name.
//
// Defaults ([choice], PATENTS.md section 4 k8s_select): the mean of LeastAllocated and
// BalancedAllocation. ServerLoad is CN109992422A's first preset principle as a score;
// GpuBestFit packs GPU memory (useful to keep whole GPUs free).

#include <array>
#include <string>

#include "core/filters.h"
#include "core/node.h"

namespace gpusched::core {

enum ScorerId : int {
  kScorerLeastAllocated = 0,
  kScorerBalancedAllocation,
  kScorerServerLoad,
  kScorerGpuBestFit,
  kNumScorers,
};

const char* ScorerName(int id);

struct ScoreWeights {
  std::array<double, kNumScorers> weight = {1.0, 1.0, 0.0, 0.0};
};

// Σ_r (capacity - allocated - request) / capacity × 100 / |r| over CPU, RAM and GPU memory,
// skipping resources the node does not have.
double LeastAllocatedScore(const NodeState& n, const PlacementRequest& r);
// (1 - standard deviation of the CPU, RAM and GPU-memory fractions after placement) × 100.
double BalancedAllocationScore(const NodeState& n, const PlacementRequest& r);
// 100 / (1 + tasks already on the node).
double ServerLoadScore(const NodeState& n);
// GPU-memory fraction after placement × 100.
double GpuBestFitScore(const NodeState& n, const PlacementRequest& r);

// What the scorers read of a node, taken from the node (explanations) or from its summary
// (ranking): one formula per plugin for both, so the score that ranks is the score `why`
// explains (issue 40).
struct ScoreInputs {
  int64_t cpu_alloc = 0, mem_alloc = 0;
  MiB gpu_alloc_mib = 0, max_gpu_total_mib = 0;
  int32_t gpu_count = 0, running_tasks = 0;
  double inv_cpu = 0, inv_mem = 0, inv_gpu_mem = 0;
};
ScoreInputs ScoreInputsOf(const NodeState& n);
ScoreInputs ScoreInputsOf(const NodeSummary& s);
// Every plugin's value for `r` on the node, indexed by ScorerId.
std::array<double, kNumScorers> ScorerValues(const ScoreInputs& in, const PlacementRequest& r);

double ScorerValue(int id, const NodeState& n, const PlacementRequest& r);
// Σ weight × plugin / Σ weight, computing the shared used-fractions once.
double WeightedScore(const ScoreWeights& w, const NodeState& n, const PlacementRequest& r);

// WeightedScore from the compact summary: ScorerValues weighted, except the default plugins
// on a node with CPU, RAM and GPUs, computed inline (the hot case; scorers_test checks that
// it agrees with ScorerValue over random nodes).
double WeightedScoreFast(const ScoreWeights& w, const NodeSummary& s, const PlacementRequest& r);

// Used fractions of CPU, RAM and GPU memory after placement, clamped to [0, 1]; returns how
// many of the three the node has.
int UsedFractions(const NodeState& n, const PlacementRequest& r, double out[3]);
double LeastAllocatedFromFractions(const double f[3], int k);
double BalancedAllocationFromFractions(const double f[3], int k);

}  // namespace gpusched::core
