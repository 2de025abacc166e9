// Issue 40: the filters are one table (kFilters). The table decides what the hand-coded chain
// it replaced decided (the same filter for every node, so the same counts in `why` and in
// metrics), the summary path (FirstRejectingFilterFast) agrees with it, and names, reasons
// and ids are those metrics and reports already use.

#include "core/filters.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "base/rng.h"
#include "core/cluster_state.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;

// The chain FirstRejectingFilter was before the table, kept as the oracle.
int HandCodedChain(const NodeState& n, const PlacementRequest& r, const FilterOptions& o) {
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

// A node with some of everything a filter reads: models (sometimes mixed), unhealthy GPUs,
// reported free memory, taints, labels, liveness flags, cordon and drain, reservations.
void AddRandomNode(ClusterState& cluster, Rng& rng, int i) {
  NodeSpec n = testing::MakeNode("n" + std::to_string(i), static_cast<int>(rng.UniformInt(0, 8)),
                                 rng.UniformInt(8, 80) * kGiB, rng.Bernoulli(0.5) ? "A100" : "H100");
  n.capacity = {rng.UniformInt(0, 64) * 1000, rng.UniformInt(0, 512) * kGiB};
  if (!n.gpus.empty() && rng.Bernoulli(0.2)) n.gpus.back().model = "V100";
  if (rng.Bernoulli(0.15)) {
    n.taints.push_back({"k", "v", rng.Bernoulli(0.3) ? TaintEffect::kPreferNoSchedule
                                                     : TaintEffect::kNoSchedule});
  }
  if (rng.Bernoulli(0.5)) n.labels["zone"] = rng.Bernoulli(0.5) ? "a" : "b";
  const size_t index = *cluster.Upsert(n, 0);
  Placement p;  // CPU and RAM, and a share of some GPUs
  p.node_index = index;
  p.node = n.name;
  p.resources = {rng.UniformInt(0, n.capacity.cpu_milli), rng.UniformInt(0, n.capacity.mem_mib)};
  for (size_t g = 0; g < n.gpus.size(); ++g) {
    if (!rng.Bernoulli(0.4)) continue;
    p.gpus.push_back(static_cast<int>(g));
    p.gpu_mem_mib.push_back(rng.UniformInt(0, n.gpus[g].total_mib));
  }
  cluster.Reserve(p);
  cluster.Update(index, [&](NodeState& s) {
    s.reachable = !rng.Bernoulli(0.05);
    s.available = !rng.Bernoulli(0.05);
    s.cordoned = rng.Bernoulli(0.05);
    s.draining = rng.Bernoulli(0.03);
    for (GpuState& g : s.gpus) {
      g.healthy = !rng.Bernoulli(0.1);
      if (rng.Bernoulli(0.5)) g.reported_free_mib = rng.UniformInt(0, g.total_mib);
    }
  });
}

struct RandomRequest {
  PlacementRequest r;
  std::map<std::string, std::string> selector;
  std::vector<Toleration> tolerations;
};

void Randomize(RandomRequest& q, Rng& rng, const ClusterState& cluster) {
  q.r = PlacementRequest{};
  q.r.gpus = rng.UniformInt(0, 5);
  q.r.exclusive = rng.Bernoulli(0.3);
  q.r.gpu_mem_mib = rng.UniformInt(0, 80) * kGiB;
  const char* models[] = {"A100", "H100", "V100"};
  q.r.model_id = rng.Bernoulli(0.4) ? cluster.ModelId(models[rng.UniformInt(0, 2)]) : -1;
  q.r.resources = {rng.UniformInt(0, 40) * 1000, rng.UniformInt(0, 300) * kGiB};
  q.selector.clear();
  if (rng.Bernoulli(0.2)) q.selector["zone"] = "a";
  q.r.node_selector = rng.Bernoulli(0.8) ? &q.selector : nullptr;
  q.tolerations.clear();
  if (rng.Bernoulli(0.5)) q.tolerations.push_back({"k", "v", false, false});
  q.r.tolerations = rng.Bernoulli(0.8) ? &q.tolerations : nullptr;
}

TEST(FiltersTest, Issue40_TableDecidesAsTheHandCodedChainOnRandomNodes) {
  const uint64_t seed = 40;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  ClusterState cluster;
  for (int i = 0; i < 300; ++i) AddRandomNode(cluster, rng, i);
  FilterCounts counted{};
  RandomRequest q;
  for (int trial = 0; trial < 3000; ++trial) {
    Randomize(q, rng, cluster);
    FilterOptions o;
    o.use_reported_free = rng.Bernoulli(0.2);
    for (size_t i = 0; i < cluster.size(); ++i) {
      const int expected = HandCodedChain(cluster.node(i), q.r, o);
      ASSERT_EQ(FirstRejectingFilter(cluster.node(i), q.r, o), expected)
          << "seed " << seed << " trial " << trial << " node " << i;
      ASSERT_EQ(FirstRejectingFilterFast(cluster.summary(i), cluster.node(i), q.r, o), expected)
          << "seed " << seed << " trial " << trial << " node " << i;
      if (expected < kNumFilters) ++counted[static_cast<size_t>(expected)];
    }
  }
  // Every filter rejected some node: the comparison reached each row.
  for (int f = 0; f < kNumFilters; ++f) EXPECT_GT(counted[static_cast<size_t>(f)], 0) << f;
}

TEST(FiltersTest, Issue40_NamesReasonsAndIdsStayAsMetricsAndReportsUseThem) {
  const char* names[kNumFilters] = {"Reachable",    "Available", "NodeUnschedulable",
                                    "TaintToleration", "NodeSelector", "CpuFit",
                                    "MemoryFit",    "GpuModel",  "GpuCount",
                                    "GpuMemoryFit", "GpuHealth"};
  for (int f = 0; f < kNumFilters; ++f) EXPECT_STREQ(FilterName(f), names[f]) << f;
  EXPECT_STREQ(FilterReason(kFilterGpuMemory), "insufficient GPU memory");
  EXPECT_STREQ(FilterReason(kFilterAvailable), "unavailable (no heartbeat)");
  EXPECT_STREQ(FilterName(kNumFilters), "none");
  EXPECT_STREQ(FilterReason(-1), "none");
  // The run order: GpuHealth (the newest id) before GpuMemoryFit.
  EXPECT_EQ(kFilters.front().id, kFilterReachable);
  EXPECT_EQ(kFilters[kFilters.size() - 2].id, kFilterGpuHealth);
  EXPECT_EQ(kFilters.back().id, kFilterGpuMemory);
  for (int f : {kFilterTaintToleration, kFilterNodeSelector, kFilterGpuModel, kFilterGpuCount}) {
    EXPECT_TRUE(RejectsForWhatTheNodeIs(f)) << FilterName(f);
  }
  for (int f : {kFilterReachable, kFilterCpuFit, kFilterGpuHealth, kFilterGpuMemory}) {
    EXPECT_FALSE(RejectsForWhatTheNodeIs(f)) << FilterName(f);
  }
}

}  // namespace
}  // namespace gpusched::core
