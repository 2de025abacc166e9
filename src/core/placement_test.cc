// The filter -> score -> pick pipeline on its own (Placer), over hand-built clusters.

#include "core/placement.h"

#include <gtest/gtest.h>

#include "base/rng.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;

TEST(Placer, FastFilterAgreesWithTheFullFilterOnRandomClusters) {
  const uint64_t seed = 20261130;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  ClusterState cluster;
  for (int i = 0; i < 200; ++i) {
    NodeSpec n = MakeNode("n" + std::to_string(i), static_cast<int>(rng.UniformInt(0, 8)),
                          rng.UniformInt(8, 80) * kGiB, rng.Bernoulli(0.5) ? "A100" : "H100");
    if (!n.gpus.empty() && rng.Bernoulli(0.2)) n.gpus.back().model = "V100";  // mixed node
    if (rng.Bernoulli(0.1)) n.taints.push_back({"k", "v", TaintEffect::kNoSchedule});
    ASSERT_TRUE(cluster.Upsert(n, 0).ok());
    const size_t index = *cluster.Find(n.name);
    cluster.Update(index, [&](NodeState& s) {
      s.reachable = !rng.Bernoulli(0.05);
      s.cordoned = rng.Bernoulli(0.05);
    });
    // Random existing reservations.
    for (int k = 0; k < 3 && !n.gpus.empty(); ++k) {
      const int g = static_cast<int>(rng.UniformInt(0, static_cast<int64_t>(n.gpus.size()) - 1));
      const MiB free = cluster.node(index).gpus[static_cast<size_t>(g)].accounted_free();
      if (free <= 0) continue;
      Placement p;
      p.node_index = index;
      p.gpus = {g};
      p.gpu_mem_mib = {rng.UniformInt(1, free)};
      p.resources = {rng.UniformInt(0, 8000), rng.UniformInt(0, 64 * kGiB)};
      cluster.Reserve(p);
    }
  }
  const int a100 = cluster.ModelId("A100");
  for (int trial = 0; trial < 2000; ++trial) {
    PlacementRequest r;
    r.gpus = rng.UniformInt(0, 4);
    r.exclusive = rng.Bernoulli(0.3);
    r.gpu_mem_mib = rng.UniformInt(1, 80) * kGiB;
    r.model_id = rng.Bernoulli(0.3) ? a100 : -1;
    r.resources = {rng.UniformInt(0, 70'000), rng.UniformInt(0, 600 * kGiB)};
    FilterOptions o;
    for (size_t i = 0; i < cluster.size(); ++i) {
      ASSERT_EQ(FirstRejectingFilterFast(cluster.summary(i), cluster.node(i), r, o),
                FirstRejectingFilter(cluster.node(i), r, o))
          << "node " << i << " trial " << trial;
    }
  }
}

TEST(Placer, TiesGoToTheLowestNodeName) {
  ClusterState cluster;
  for (const char* name : {"c", "a", "b"}) ASSERT_TRUE(cluster.Upsert(MakeNode(name, 1, 16 * kGiB), 0).ok());
  Placer placer({}, nullptr);
  PlacementRequest r;
  r.gpus = 1;
  r.gpu_mem_mib = kGiB;
  PlacementResult result = placer.Place(cluster, r);
  ASSERT_TRUE(result.placed());
  EXPECT_EQ(result.placement.node, "a");
}

TEST(Placer, BestFitGpuOrderPacksSharedGpus) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.Upsert(MakeNode("n", 2, 16 * kGiB), 0).ok());
  Placement p{0, "n", {1}, {10 * kGiB}, {}, false, ""};
  cluster.Reserve(p);
  PlacementRequest r;
  r.gpus = 1;
  r.gpu_mem_mib = 4 * kGiB;
  PlacementOptions spread;
  EXPECT_EQ(Placer(spread, nullptr).Place(cluster, r).placement.gpus, std::vector<int>{0});
  PlacementOptions pack;
  pack.gpu_order = GpuOrder::kBestFit;
  EXPECT_EQ(Placer(pack, nullptr).Place(cluster, r).placement.gpus, std::vector<int>{1});
}

TEST(Placer, ReportedFreeMemoryIsHonouredWhenAsked) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.Upsert(MakeNode("n", 1, 16 * kGiB), 0).ok());
  // Something outside gpusched uses 12 GiB of the GPU.
  cluster.Update(0, [](NodeState& n) { n.gpus[0].reported_free_mib = 4 * kGiB; });
  PlacementRequest r;
  r.gpus = 1;
  r.gpu_mem_mib = 8 * kGiB;
  EXPECT_TRUE(Placer({}, nullptr).Place(cluster, r).placed());  // default: accounted free
  PlacementOptions o;
  o.filter.use_reported_free = true;
  PlacementResult result = Placer(o, nullptr).Place(cluster, r);
  EXPECT_FALSE(result.placed());
  EXPECT_EQ(result.report.rejected[kFilterGpuMemory], 1);
}

// Ray's policies answer placed / retry later / infeasible; so does Place().
TEST(Placer, OutcomeIsPlacedRetryLaterOrInfeasibleWithItsReason) {
  ClusterState cluster;
  PlacementRequest r;
  r.gpus = 1;
  r.gpu_mem_mib = 8 * kGiB;
  const Placer placer({}, nullptr);
  // No node yet: one may join.
  EXPECT_EQ(placer.Place(cluster, r).outcome, PlaceOutcome::kRetryLater);

  ASSERT_TRUE(cluster.Upsert(MakeNode("n", 2, 16 * kGiB), 0).ok());
  const PlacementResult placed = placer.Place(cluster, r);
  EXPECT_EQ(placed.outcome, PlaceOutcome::kPlaced);
  EXPECT_EQ(placed.placement.node, "n");
  EXPECT_EQ(placed.reason, "");

  // Both GPUs held: a release can make room.
  cluster.Reserve({0, "n", {0, 1}, {12 * kGiB, 12 * kGiB}, {}, false, ""});
  const PlacementResult busy = placer.Place(cluster, r);
  EXPECT_EQ(busy.outcome, PlaceOutcome::kRetryLater);
  EXPECT_EQ(busy.reason, "0/1 nodes fit: 1 insufficient GPU memory");

  // More GPUs than the node has: no release helps.
  r.gpus = 3;
  const PlacementResult too_many = placer.Place(cluster, r);
  EXPECT_EQ(too_many.outcome, PlaceOutcome::kInfeasible);
  EXPECT_EQ(too_many.reason, "0/1 nodes fit: 1 too few GPUs");

  // The same request while one node is only cordoned: it may come back.
  ASSERT_TRUE(cluster.Upsert(MakeNode("m", 4, 16 * kGiB), 0).ok());
  cluster.Update(1, [](NodeState& n) { n.cordoned = true; });
  EXPECT_EQ(placer.Place(cluster, r).outcome, PlaceOutcome::kRetryLater);
  EXPECT_STREQ(PlaceOutcomeName(PlaceOutcome::kInfeasible), "infeasible");
}

TEST(Filters, TolerationSemantics) {
  std::vector<Taint> taints = {{"gpu", "a100", TaintEffect::kNoSchedule},
                               {"soft", "", TaintEffect::kPreferNoSchedule}};
  std::vector<Toleration> none;
  EXPECT_FALSE(ToleratesAll(taints, &none));
  std::vector<Toleration> exact = {{"gpu", "a100", false, false, {}}};
  EXPECT_TRUE(ToleratesAll(taints, &exact));  // PreferNoSchedule never filters
  std::vector<Toleration> wrong_value = {{"gpu", "h100", false, false, {}}};
  EXPECT_FALSE(ToleratesAll(taints, &wrong_value));
  std::vector<Toleration> exists = {{"gpu", "", true, false, {}}};
  EXPECT_TRUE(ToleratesAll(taints, &exists));
  std::vector<Toleration> wrong_effect = {{"gpu", "a100", false, true, TaintEffect::kNoExecute}};
  EXPECT_FALSE(ToleratesAll(taints, &wrong_effect));
  std::vector<Toleration> everything = {{"", "", true, false, {}}};
  EXPECT_TRUE(ToleratesAll(taints, &everything));
}

}  // namespace
}  // namespace gpusched::core
