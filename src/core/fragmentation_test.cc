// The fragmentation measure on hand-worked nodes, the workload learned from submitted tasks,
// and the min_fragmentation orders against best fit on a hand-computed cluster.

#include "core/fragmentation.h"

#include <gtest/gtest.h>

#include "core/placement.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;

PlacementRequest Shared(MiB mib, int64_t cpu_milli = 0) {
  PlacementRequest r;
  r.gpus = 1;
  r.gpu_mem_mib = mib;
  r.resources.cpu_milli = cpu_milli;
  return r;
}

PlacementRequest Whole(int64_t gpus) {
  PlacementRequest r;
  r.gpus = gpus;
  r.exclusive = true;
  return r;
}

// One node of four 16 GiB GPUs: GPU0 has 4 GiB free (0.25 of a GPU), GPU1 8 GiB (0.5), GPU2 is
// whole and free, GPU3 is held whole. 64 cores.
ClusterState HandNode() {
  ClusterState cluster;
  EXPECT_TRUE(cluster.Upsert(MakeNode("n", 4, 16 * kGiB), 0).ok());
  cluster.Reserve({0, "n", {0}, {12 * kGiB}, {}, false, ""});
  cluster.Reserve({0, "n", {1}, {8 * kGiB}, {}, false, ""});
  cluster.Reserve({0, "n", {3}, {16 * kGiB}, {}, true, ""});
  return cluster;
}

TEST(Fragmentation, MeasureOnAHandWorkedNode) {
  const ClusterState cluster = HandNode();
  const NodeState& n = cluster.node(0);
  const FilterOptions o;
  // 6 GiB shares fit GPU1 and GPU2; only GPU0's 0.25 is a fragment (GPU3 has nothing idle).
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Shared(6 * kGiB))), 0.25);
  // A whole GPU fits GPU2 only: GPU0 and GPU1 are fragments.
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Whole(1))), 0.75);
  // Two whole GPUs cannot go here at all: every idle GPU counts (0.25 + 0.5 + 1).
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Whole(2))), 1.75);
  // Nor can a task asking for more CPU than is left, however small its share.
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Shared(2 * kGiB, 70'000))), 1.75);
  // A 2 GiB share fits every GPU with memory left: nothing is a fragment.
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Shared(2 * kGiB))), 0);

  const std::vector<WeightedShape> m = {{WorkloadShape::Of(Shared(6 * kGiB)), 0.5},
                                        {WorkloadShape::Of(Whole(1)), 0.25},
                                        {WorkloadShape::Of(Whole(2)), 0.25}};
  // 0.5 x 0.25 + 0.25 x 0.75 + 0.25 x 1.75
  EXPECT_DOUBLE_EQ(ExpectedFragmentation(n, o, m), 0.75);
  NodeFragmentation frag(m, FragmentationMeasure::kNextTask);
  frag.Reset(n, o);
  EXPECT_DOUBLE_EQ(frag.Expected(), 0.75);
}

TEST(Fragmentation, AnUnhealthyGpuHasNoIdleMemory) {
  ClusterState cluster = HandNode();
  cluster.Update(0, [](NodeState& s) { s.gpus[2].healthy = false; });
  const NodeState& n = cluster.node(0);
  // 6 GiB fits GPU1 only; GPU0's 0.25 is the fragment, GPU2 counts nothing.
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, {}, WorkloadShape::Of(Shared(6 * kGiB))), 0.25);
  // No whole GPU is left for a whole-GPU task: GPU0 and GPU1 count.
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, {}, WorkloadShape::Of(Whole(1))), 0.75);
}

// Growth by hand, workload as above (F = 0.75 now). A 6 GiB share on GPU1 leaves it 0.125:
// the share shape then fits GPU2 only (F 0.375), the whole GPU too (0.375), two whole GPUs
// still nowhere (1.375): F = 0.625, growth -0.125. On GPU2 it leaves 0.625 there: shares fit
// GPU1 and GPU2 (0.25), no whole GPU is left (1.375 twice): F = 0.8125, growth +0.0625.
TEST(Fragmentation, GrowthOfAPlacementByHandAndAfterTheReservation) {
  ClusterState cluster = HandNode();
  const FilterOptions o;
  const std::vector<WeightedShape> m = {{WorkloadShape::Of(Shared(6 * kGiB)), 0.5},
                                        {WorkloadShape::Of(Whole(1)), 0.25},
                                        {WorkloadShape::Of(Whole(2)), 0.25}};
  const PlacementRequest r = Shared(6 * kGiB);
  NodeFragmentation frag(m, FragmentationMeasure::kNextTask);
  frag.Reset(cluster.node(0), o);
  const int gpu1[] = {1}, gpu2[] = {2};
  EXPECT_DOUBLE_EQ(frag.Growth(r, gpu1), -0.125);
  EXPECT_DOUBLE_EQ(frag.Growth(r, gpu2), 0.0625);

  // The measure on the node after the reservation agrees.
  cluster.Reserve({0, "n", {2}, {6 * kGiB}, {}, false, ""});
  EXPECT_DOUBLE_EQ(ExpectedFragmentation(cluster.node(0), o, m), 0.8125);
}

// The packing measure on the same node (idle 0.25 + 0.5 + 1 = 1.75 GPUs, 64 cores free).
TEST(Fragmentation, PackingMeasureOnAHandWorkedNode) {
  const ClusterState cluster = HandNode();
  const NodeState& n = cluster.node(0);
  const FilterOptions o;
  const auto packing = [&](const PlacementRequest& r) {
    return ShapeFragmentation(n, o, WorkloadShape::Of(r), FragmentationMeasure::kPacking);
  };
  // 6 GiB shares (0.375): none on GPU0, one on GPU1, two on GPU2; 1.75 - 3 x 0.375 is left
  // over, where the next-task measure sees GPU0's 0.25 only.
  EXPECT_DOUBLE_EQ(packing(Shared(6 * kGiB)), 0.625);
  // Whole GPUs: one fits (GPU2); one pair does not.
  EXPECT_DOUBLE_EQ(packing(Whole(1)), 0.75);
  EXPECT_DOUBLE_EQ(packing(Whole(2)), 1.75);
  // 2 GiB shares: 2 + 4 + 8 of them use every idle GPU...
  EXPECT_DOUBLE_EQ(packing(Shared(2 * kGiB)), 0);
  // ...but at 20 cores each the 64 cores hold three: 1.75 - 3 x 0.125. The next-task measure
  // sees no fragment at all here.
  EXPECT_DOUBLE_EQ(packing(Shared(2 * kGiB, 20'000)), 1.375);
  EXPECT_DOUBLE_EQ(ShapeFragmentation(n, o, WorkloadShape::Of(Shared(2 * kGiB, 20'000))), 0);
}

// Node a: two GPUs and 16 cores; node b: two GPUs and 64 cores. The workload so far: whole-GPU
// tasks of 8 cores. A CPU-only task of 8 cores arrives, then four whole-GPU tasks of 8 cores.
// The next-task measure sees no growth on either node (both can still host one more
// whole-GPU task), so best fit and then the name choose a, which is then left with CPU for one
// whole-GPU task: one of the four finds no node. By packing, a would drop from two 8-core
// whole-GPU tasks to one (growth +1 GPU) and b stays at two (growth 0): all four fit.
TEST(Placer, PackingMeasureKeepsCpuForTheGpus) {
  const auto cluster_now = [] {
    ClusterState c;
    NodeSpec a = MakeNode("a", 2, 16 * kGiB);
    a.capacity.cpu_milli = 16'000;
    EXPECT_TRUE(c.Upsert(a, 0).ok());
    EXPECT_TRUE(c.Upsert(MakeNode("b", 2, 16 * kGiB), 0).ok());
    return c;
  };
  PlacementRequest whole = Whole(1);
  whole.resources.cpu_milli = 8'000;
  PlacementRequest cpu_only;
  cpu_only.resources.cpu_milli = 8'000;
  WorkloadDistribution seen;
  seen.Observe(whole);

  const auto run = [&](FragmentationMeasure measure, std::string* first) {
    PlacementOptions o;
    o.node_order = NodeOrder::kMinFragmentation;
    o.gpu_order = GpuOrder::kMinFragmentation;
    o.fragmentation = measure;
    ClusterState c = cluster_now();
    const Placer placer(o, nullptr);
    int placed = 0;
    for (const PlacementRequest& r : {cpu_only, whole, whole, whole, whole}) {
      const PlacementResult result = placer.Place(c, r, &seen);
      if (!result.placed()) continue;
      if (placed++ == 0) *first = result.placement.node;
      c.Reserve(result.placement);
    }
    return placed;
  };
  std::string first;
  EXPECT_EQ(run(FragmentationMeasure::kNextTask, &first), 4);
  EXPECT_EQ(first, "a");
  EXPECT_EQ(run(FragmentationMeasure::kPacking, &first), 5);
  EXPECT_EQ(first, "b");
}

TEST(WorkloadDistribution, KeepsTheMostFrequentShapesUpToTheCoverage) {
  WorkloadDistribution w({.coverage = 0.8, .max_shapes = 64, .max_distinct = 4096});
  for (int i = 0; i < 5; ++i) w.Observe(Shared(4 * kGiB));
  for (int i = 0; i < 3; ++i) w.Observe(Whole(1));
  w.Observe(Shared(2 * kGiB));
  w.Observe(Shared(8 * kGiB));
  w.Observe(PlacementRequest{});  // no GPU: not part of the workload
  EXPECT_EQ(w.observed(), 10);
  // 5 of 10 is short of 80 %; with the 3 whole-GPU tasks 8 of 10 reach it.
  ASSERT_EQ(w.typical().size(), 2u);
  EXPECT_EQ(w.typical()[0].shape, WorkloadShape::Of(Shared(4 * kGiB)));
  EXPECT_DOUBLE_EQ(w.typical()[0].p, 5.0 / 8);
  EXPECT_EQ(w.typical()[1].shape, WorkloadShape::Of(Whole(1)));
  EXPECT_DOUBLE_EQ(w.typical()[1].p, 3.0 / 8);
}

TEST(WorkloadDistribution, EqualCountsGoInShapeOrderAndMaxShapesCaps) {
  WorkloadDistribution w({.coverage = 1.0, .max_shapes = 2, .max_distinct = 4096});
  w.Observe(Shared(8 * kGiB));  // seen first, but the larger share
  w.Observe(Shared(2 * kGiB));
  w.Observe(Shared(4 * kGiB));
  ASSERT_EQ(w.typical().size(), 2u);
  EXPECT_EQ(w.typical()[0].shape.gpu_mem_mib, 2 * kGiB);
  EXPECT_EQ(w.typical()[1].shape.gpu_mem_mib, 4 * kGiB);
  EXPECT_DOUBLE_EQ(w.typical()[0].p, 0.5);

  WorkloadDistribution small({.coverage = 1.0, .max_shapes = 64, .max_distinct = 1});
  small.Observe(Shared(2 * kGiB));
  small.Observe(Shared(4 * kGiB));  // a second distinct shape is over the bound
  EXPECT_EQ(small.observed(), 1);
  ASSERT_EQ(small.typical().size(), 1u);
}

// Node a: four 16 GiB GPUs, GPU0-2 held whole, GPU3 free. Node b: two, GPU0 half used, GPU1
// free. The workload so far: half-GPU tasks and whole-GPU tasks, equally often. A half-GPU
// task arrives, then two whole-GPU tasks.
// Best fit takes a (7/8 of its GPU memory used after, b 1/2) and breaks a's last whole GPU:
// the second whole-GPU task finds no node. By hand, the growth of F: on a's GPU3 +0.25 (no
// whole GPU left there: 0.5 x 0.5), on b's GPU0 -0.25 (b's half-free GPU0 stops being a
// fragment for whole GPUs), on b's GPU1 +0.25. min_fragmentation fills b's GPU0 and both
// whole-GPU tasks fit.
TEST(Placer, MinFragmentationKeepsWholeGpusWhereBestFitBreaksThem) {
  const auto cluster_now = [] {
    ClusterState c;
    EXPECT_TRUE(c.Upsert(MakeNode("a", 4, 16 * kGiB), 0).ok());
    EXPECT_TRUE(c.Upsert(MakeNode("b", 2, 16 * kGiB), 0).ok());
    c.Reserve({*c.Find("a"), "a", {0, 1, 2}, {16 * kGiB, 16 * kGiB, 16 * kGiB}, {}, true, ""});
    c.Reserve({*c.Find("b"), "b", {0}, {8 * kGiB}, {}, false, ""});
    return c;
  };
  WorkloadDistribution seen;
  seen.Observe(Shared(8 * kGiB));
  seen.Observe(Whole(1));

  PlacementOptions best_fit;  // as `gpusched sim --placement best-fit`
  best_fit.weights.weight = {0, 0, 0, 1};
  best_fit.gpu_order = GpuOrder::kBestFit;
  PlacementOptions min_frag;
  min_frag.node_order = NodeOrder::kMinFragmentation;
  min_frag.gpu_order = GpuOrder::kMinFragmentation;

  const auto run = [&](const PlacementOptions& o, std::string* first) {
    ClusterState c = cluster_now();
    const Placer placer(o, nullptr);
    int placed = 0;
    for (const PlacementRequest& r : {Shared(8 * kGiB), Whole(1), Whole(1)}) {
      const PlacementResult result = placer.Place(c, r, &seen);
      if (!result.placed()) continue;
      if (placed++ == 0) {
        *first = result.placement.node + ":" + std::to_string(result.placement.gpus.at(0));
      }
      c.Reserve(result.placement);
    }
    return placed;
  };
  std::string first;
  EXPECT_EQ(run(best_fit, &first), 2);
  EXPECT_EQ(first, "a:3");
  EXPECT_EQ(run(min_frag, &first), 3);
  EXPECT_EQ(first, "b:0");

  // The chosen node's report carries the growth, in milli-GPUs.
  const PlacementResult r = Placer(min_frag, nullptr).Place(cluster_now(), Shared(8 * kGiB), &seen);
  ASSERT_TRUE(r.placed());
  ASSERT_FALSE(r.report.breakdown.empty());
  EXPECT_EQ(r.report.breakdown[0].name, "FragmentationGrowthMilliGpu");
  EXPECT_DOUBLE_EQ(r.report.breakdown[0].value, -250);
  // The GPU order alone, inside b: GPU0 (growth -0.25) over GPU1 (+0.25).
  ClusterState c = cluster_now();
  EXPECT_EQ(Placer(min_frag, nullptr).PickGpus(c.node(*c.Find("b")), Shared(8 * kGiB), nullptr, &seen),
            std::vector<int>{0});
}

TEST(Placer, MinFragmentationWithoutAWorkloadIsBestFit) {
  ClusterState c;
  ASSERT_TRUE(c.Upsert(MakeNode("a", 2, 16 * kGiB), 0).ok());
  ASSERT_TRUE(c.Upsert(MakeNode("b", 2, 16 * kGiB), 0).ok());
  c.Reserve({*c.Find("b"), "b", {1}, {4 * kGiB}, {}, false, ""});
  PlacementOptions o;
  o.node_order = NodeOrder::kMinFragmentation;
  o.gpu_order = GpuOrder::kMinFragmentation;
  const PlacementResult r = Placer(o, nullptr).Place(c, Shared(4 * kGiB));
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, "b");                   // the fuller node
  EXPECT_EQ(r.placement.gpus, std::vector<int>{1});   // the fuller GPU
}

class FragmentationSchedulerTest : public testing::SchedulerTest {};

// The scheduler learns the workload from what is submitted, when the order reads it.
TEST_F(FragmentationSchedulerTest, SubmittedShapesFeedTheWorkload) {
  AddNode(MakeNode("n", 2, 16 * kGiB));
  Submit(testing::SharedTask(4 * kGiB));
  EXPECT_EQ(sched_->resources().workload().observed(), 0);  // default orders: not kept

  SchedulerConfig config;
  config.placement.node_order = NodeOrder::kMinFragmentation;
  config.placement.gpu_order = GpuOrder::kMinFragmentation;
  Init(config);
  AddNode(MakeNode("n", 2, 16 * kGiB));
  Submit(testing::SharedTask(4 * kGiB));
  Submit(testing::SharedTask(4 * kGiB));
  Submit(testing::WholeGpuTask(1));
  const WorkloadDistribution& w = sched_->resources().workload();
  EXPECT_EQ(w.observed(), 3);
  ASSERT_EQ(w.typical().size(), 2u);
  EXPECT_EQ(w.typical()[0].shape.gpu_mem_mib, 4 * kGiB);
  EXPECT_DOUBLE_EQ(w.typical()[0].p, 2.0 / 3);
  EXPECT_TRUE(w.typical()[1].shape.exclusive);
}

}  // namespace
}  // namespace gpusched::core
