// Issue 40: the weighted score that ranks nodes (WeightedScoreFast, over the node summaries)
// and the per-plugin values `why` explains (ScorerValue, over the nodes) agree: on random
// clusters, requests and weights, the explained sum is the ranking score.

#include "core/scorers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "base/rng.h"
#include "core/cluster_state.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;

// A node with random capacity (sometimes no CPU, RAM or GPUs), some of it reserved, and a
// random number of tasks.
void AddRandomNode(ClusterState& cluster, Rng& rng, int i) {
  NodeSpec n;
  n.name = "n" + std::to_string(i);
  n.address = n.name + ":7071";
  n.capacity.cpu_milli = rng.Bernoulli(0.1) ? 0 : rng.UniformInt(1, 128) * 1000;
  n.capacity.mem_mib = rng.Bernoulli(0.1) ? 0 : rng.UniformInt(1, 1024) * kGiB;
  const int gpus = static_cast<int>(rng.UniformInt(0, 8));
  const MiB size = rng.UniformInt(8, 96) * kGiB;
  for (int g = 0; g < gpus; ++g) n.gpus.push_back({"A100", rng.Bernoulli(0.2) ? size / 2 : size});
  auto index = cluster.Upsert(n, 0);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  Placement p;
  p.node_index = *index;
  p.node = n.name;
  p.resources.cpu_milli = rng.UniformInt(0, n.capacity.cpu_milli);
  p.resources.mem_mib = rng.UniformInt(0, n.capacity.mem_mib);
  for (int g = 0; g < gpus; ++g) {
    if (!rng.Bernoulli(0.5)) continue;
    p.gpus.push_back(g);
    p.gpu_mem_mib.push_back(rng.UniformInt(0, n.gpus[static_cast<size_t>(g)].total_mib));
  }
  cluster.Reserve(p);
  const int tasks = static_cast<int>(rng.UniformInt(0, 12));
  cluster.Update(*index, [tasks](NodeState& s) { s.running_tasks = tasks; });
}

PlacementRequest RandomRequest(Rng& rng) {
  PlacementRequest r;
  r.gpus = rng.UniformInt(0, 4);
  r.exclusive = rng.Bernoulli(0.2);
  r.gpu_mem_mib = rng.UniformInt(0, 80) * kGiB;
  r.resources.cpu_milli = rng.UniformInt(0, 64) * 1000;
  r.resources.mem_mib = rng.UniformInt(0, 512) * kGiB;
  return r;
}

// The defaults (the hot case) half the time, else random weights with some plugins off.
ScoreWeights RandomWeights(Rng& rng) {
  ScoreWeights w;
  if (rng.Bernoulli(0.5)) return w;
  for (double& x : w.weight) x = rng.Bernoulli(0.3) ? 0.0 : rng.Uniform01() * 4;
  return w;
}

// What Placer puts in the report `why` prints: each weighted plugin's value.
double ExplainedScore(const ScoreWeights& w, const NodeState& n, const PlacementRequest& r) {
  double sum = 0, weights = 0;
  for (int s = 0; s < kNumScorers; ++s) {
    if (w.weight[s] == 0) continue;
    sum += w.weight[s] * ScorerValue(s, n, r);
    weights += w.weight[s];
  }
  return weights > 0 ? sum / weights : 0.0;
}

TEST(ScorersTest, Issue40_RankingScoreIsTheExplainedScoreOverRandomNodes) {
  const uint64_t seed = 40;
  std::cout << "seed " << seed << "\n";
  Rng rng(seed);
  ClusterState cluster;
  for (int i = 0; i < 200; ++i) AddRandomNode(cluster, rng, i);
  int compared = 0;
  for (int round = 0; round < 50; ++round) {
    const PlacementRequest r = RandomRequest(rng);
    const ScoreWeights w = RandomWeights(rng);
    for (size_t i = 0; i < cluster.size(); ++i) {
      const double fast = WeightedScoreFast(w, cluster.summary(i), r);
      const double explained = ExplainedScore(w, cluster.node(i), r);
      ASSERT_NEAR(fast, explained, 1e-9 * std::max(1.0, std::abs(explained)))
          << "seed " << seed << " round " << round << " node " << cluster.node(i).name;
      ASSERT_EQ(WeightedScore(w, cluster.node(i), r), explained);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 50 * 200);
}

// The table keeps the names `why` prints, the server config's keys and the defaults
// (PATENTS.md section 4: the mean of LeastAllocated and BalancedAllocation).
TEST(ScorersTest, Issue40_TableKeepsNamesConfigKeysAndDefaultWeights) {
  const char* names[kNumScorers] = {"LeastAllocated", "BalancedAllocation", "ServerLoad",
                                    "GpuBestFit"};
  const char* keys[kNumScorers] = {"least_allocated", "balanced_allocation", "server_load",
                                   "gpu_best_fit"};
  for (int s = 0; s < kNumScorers; ++s) {
    EXPECT_STREQ(ScorerName(s), names[s]);
    EXPECT_STREQ(kScorers[static_cast<size_t>(s)].config_key, keys[s]);
  }
  EXPECT_STREQ(ScorerName(kNumScorers), "none");
  EXPECT_EQ(ScoreWeights{}.weight, (std::array<double, kNumScorers>{1.0, 1.0, 0.0, 0.0}));
}

}  // namespace
}  // namespace gpusched::core
