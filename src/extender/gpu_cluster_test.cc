#include "extender/gpu_cluster.h"

#include <gtest/gtest.h>

#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using namespace testing;  // builders and kGiB of testing/fixtures.h

PodClaim Claim(const KubePod& pod) { return ClaimOf(pod, ModelOptions{}); }

std::vector<MiB> Allocated(const GpuCluster& c, const std::string& node) {
  std::vector<MiB> out;
  for (const core::GpuState& g : c.state().node(*c.Index(node)).gpus) out.push_back(g.allocated_mib);
  return out;
}

TEST(GpuCluster, AnnotatedPodsSitWhereTheirAnnotationsSay) {
  GpuCluster c;
  c.UpsertNode(MakeNode("n1", 4, 16 * kGiB));
  c.UpsertPod(Claim(BoundPod(MakePod("a", 0, 6 * kGiB), "n1", {2})));
  c.UpsertPod(Claim(BoundPod(MakePod("b", 2, 0), "n1", {0, 3})));
  EXPECT_EQ(Allocated(c, "n1"), (std::vector<MiB>{16 * kGiB, 0, 6 * kGiB, 16 * kGiB}));
  EXPECT_EQ(c.overcommitted_claims(), 0);
  EXPECT_TRUE(c.state().CheckInvariants().ok());
}

TEST(GpuCluster, UnannotatedPodsFillAroundAnnotatedOnesWhateverTheEventOrder) {
  const KubePod whole = BoundPod(MakePod("whole", 1, 0), "n1");
  const KubePod pinned = BoundPod(MakePod("pinned", 1, 0), "n1", {0});
  GpuCluster a, b;
  a.UpsertNode(MakeNode("n1", 2, 16 * kGiB));
  a.UpsertPod(Claim(whole));
  a.UpsertPod(Claim(pinned));
  b.UpsertPod(Claim(pinned));  // pods may arrive before their node
  b.UpsertPod(Claim(whole));
  b.UpsertNode(MakeNode("n1", 2, 16 * kGiB));
  for (const GpuCluster* c : {&a, &b}) {
    EXPECT_EQ(c->Applied("uid-default-pinned")->gpus, (std::vector<int>{0}));
    EXPECT_EQ(c->Applied("uid-default-whole")->gpus, (std::vector<int>{1}));
  }
}

TEST(GpuCluster, ClaimsBeyondCapacityAreClampedAndCountedNeverOvercommitted) {
  GpuCluster c;
  c.UpsertNode(MakeNode("n1", 1, 16 * kGiB));
  c.UpsertPod(Claim(BoundPod(MakePod("a", 0, 10 * kGiB), "n1", {0})));
  c.UpsertPod(Claim(BoundPod(MakePod("b", 0, 10 * kGiB), "n1", {0})));
  c.UpsertPod(Claim(BoundPod(MakePod("c", 1, 0), "n1")));
  EXPECT_EQ(Allocated(c, "n1"), (std::vector<MiB>{16 * kGiB}));
  EXPECT_EQ(c.overcommitted_claims(), 2);
  EXPECT_TRUE(c.state().CheckInvariants().ok());
  c.RemovePod("uid-default-a");
  EXPECT_EQ(c.overcommitted_claims(), 1);  // c still finds no whole GPU
}

TEST(GpuCluster, NodeUpdatesReapplyPodsAndRemovalForgetsTheNode) {
  GpuCluster c;
  c.UpsertNode(MakeNode("n1", 2, 16 * kGiB));
  c.UpsertPod(Claim(BoundPod(MakePod("a", 0, 4 * kGiB), "n1", {1})));
  c.UpsertNode(MakeNode("n1", 1, 16 * kGiB));  // GPU 1 disappeared: the pod lands on GPU 0
  EXPECT_EQ(Allocated(c, "n1"), (std::vector<MiB>{4 * kGiB}));
  c.RemoveNode("n1");
  EXPECT_FALSE(c.Index("n1").has_value());
  EXPECT_EQ(c.Applied("uid-default-a"), nullptr);
  c.UpsertNode(MakeNode("n1", 2, 16 * kGiB));  // back: its pod is placed again
  EXPECT_EQ(Allocated(c, "n1"), (std::vector<MiB>{0, 4 * kGiB}));
}

TEST(GpuCluster, NodeWithGpusButNoMemoryIsMarkedUnknown) {
  GpuCluster c;
  KubeNode n = MakeNode("n1", 2, 0);
  c.UpsertNode(n);
  EXPECT_FALSE(c.MemoryKnown("n1"));
  c.UpsertNode(MakeNode("n2", 0, 0));
  EXPECT_TRUE(c.MemoryKnown("n2"));  // no GPUs at all: nothing unknown
}

}  // namespace
}  // namespace gpusched::extender
