// GPU topology: the simulated topologies, validation of reported ones, and the placement
// rules (best-connected set for multi-GPU tasks; single-GPU tasks keep free NVLink groups
// whole). Each rule test also places without topology, to show the rule is what decided.

#include <gtest/gtest.h>

#include "core/placement.h"
#include "core/testing/scheduler_fixture.h"
#include "core/topology.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;

NodeSpec NodeWith(const std::string& topology, int gpus) {
  NodeSpec n = MakeNode("n", gpus, 16 * kGiB);
  auto t = SimulatedTopology(topology, gpus);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (t.ok()) n.topology = *t;
  return n;
}

// Reserves `mib` on each of `gpus` (one task each).
void Hold(ClusterState& cluster, const std::vector<int>& gpus, MiB mib) {
  for (int g : gpus) cluster.Reserve(Placement{0, "n", {g}, {mib}, {}, false, ""});
}

PlacementRequest Request(int64_t gpus, MiB mib) {
  PlacementRequest r;
  r.gpus = gpus;
  r.gpu_mem_mib = mib;
  return r;
}

TEST(TopologyTest, SimulatedTopologies) {
  auto pairs = SimulatedTopology("nvlink-pairs", 8);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(pairs->link(0, 1), GpuLink::kNvLink);
  EXPECT_EQ(pairs->link(6, 7), GpuLink::kNvLink);
  EXPECT_EQ(pairs->link(1, 2), GpuLink::kSameNuma);
  EXPECT_EQ(pairs->link(3, 4), GpuLink::kCrossSocket);
  EXPECT_EQ(pairs->numa, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  auto pcie = SimulatedTopology("pcie", 4);
  ASSERT_TRUE(pcie.ok());
  EXPECT_EQ(pcie->link(0, 1), GpuLink::kSameNuma);
  auto all = SimulatedTopology("nvswitch", 4);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->link(0, 3), GpuLink::kNvLink);
  EXPECT_TRUE(SimulatedTopology("", 4)->empty());
  EXPECT_EQ(SimulatedTopology("ring", 4).status().message(),
            "topology: \"ring\" is not pcie, nvlink-pairs or nvswitch");
}

TEST(TopologyTest, ReportedTopologiesAreChecked) {
  GpuTopology t = *SimulatedTopology("pcie", 2);
  EXPECT_TRUE(ValidateTopology(t).ok());
  t.links[1] = 3;  // [0][1] != [1][0]
  EXPECT_EQ(ValidateTopology(t).message(), "gpu_links[0][1]: 3 differs from gpu_links[1][0]");
  t.links[1] = t.links[2] = 9;
  EXPECT_EQ(ValidateTopology(t).message(), "gpu_links[0][1]: 9 is not a link level 0..3");
  t.links.pop_back();
  EXPECT_EQ(ValidateTopology(t).message(), "gpu_links: 3 values for 2 GPUs (want gpus x gpus)");
  ClusterState cluster;
  NodeSpec n = NodeWith("pcie", 2);
  n.topology.numa = {0, -7};
  EXPECT_EQ(cluster.Upsert(n, 0).status().message(),
            "node n: numa[1]: -7 is not a NUMA node (-1 = unknown)");
}

// 4 GPUs, NVLink 0-1 and 2-3, the pairs on different sockets. GPUs 0 and 3 hold 1 GiB, so
// the emptiest two (the CN109992422A spread order) are 1 and 2, joined only cross-socket.
TEST(TopologyTest, MultiGpuTaskGetsTheBestConnectedSet) {
  for (const bool with_topology : {false, true}) {
    ClusterState cluster;
    ASSERT_TRUE(cluster.Upsert(with_topology ? NodeWith("nvlink-pairs", 4)
                                             : MakeNode("n", 4, 16 * kGiB), 0).ok());
    Hold(cluster, {0, 3}, kGiB);
    const PlacementResult result = Placer({}, nullptr).Place(cluster, Request(2, 4 * kGiB));
    ASSERT_TRUE(result.placed());
    if (!with_topology) {
      EXPECT_EQ(result.placement.gpus, (std::vector<int>{1, 2}));
      EXPECT_EQ(result.placement.topology_rule, "");
      continue;
    }
    EXPECT_EQ(result.placement.gpus, (std::vector<int>{0, 1}));
    EXPECT_EQ(result.placement.topology_rule,
              "topology: GPUs 0,1 joined by NVLink (the emptiest GPUs 1,2 by cross-socket)");
    EXPECT_NE(DescribeReport(result.report).find(result.placement.topology_rule),
              std::string::npos);
  }
}

// GPU 2 is in use, so its pair 2-3 is broken already: a single-GPU task takes GPU 3 rather
// than GPU 0, which would break up the free pair 0-1 that a 2-GPU task may want.
TEST(TopologyTest, SingleGpuTaskKeepsAFreeNvLinkPairWhole) {
  for (const bool with_topology : {false, true}) {
    ClusterState cluster;
    ASSERT_TRUE(cluster.Upsert(with_topology ? NodeWith("nvlink-pairs", 4)
                                             : MakeNode("n", 4, 16 * kGiB), 0).ok());
    Hold(cluster, {2}, 2 * kGiB);
    const PlacementResult result = Placer({}, nullptr).Place(cluster, Request(1, kGiB));
    ASSERT_TRUE(result.placed());
    if (!with_topology) {
      EXPECT_EQ(result.placement.gpus, std::vector<int>{0});
      continue;
    }
    EXPECT_EQ(result.placement.gpus, std::vector<int>{3});
    EXPECT_EQ(result.placement.topology_rule,
              "topology: single-GPU task on GPU 3, keeping the free NVLink group 0,1 whole");
  }
}

TEST(TopologyTest, OnAnAllNvLinkNodeNothingIsBrokenUp) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.Upsert(NodeWith("nvswitch", 4), 0).ok());
  Hold(cluster, {2}, 2 * kGiB);
  const PlacementResult result = Placer({}, nullptr).Place(cluster, Request(1, kGiB));
  EXPECT_EQ(result.placement.gpus, std::vector<int>{0});
  EXPECT_EQ(result.placement.topology_rule, "");
}

// When every GPU that fits would break a free group, the plain order decides.
TEST(TopologyTest, WhenEveryChoiceBreaksAGroupThePlainOrderDecides) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.Upsert(NodeWith("nvlink-pairs", 4), 0).ok());
  const PlacementResult result = Placer({}, nullptr).Place(cluster, Request(1, kGiB));
  EXPECT_EQ(result.placement.gpus, std::vector<int>{0});
  EXPECT_EQ(result.placement.topology_rule, "");
}

}  // namespace
}  // namespace gpusched::core
