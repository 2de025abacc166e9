// The extender's decisions (filter reasons, scores, GPU choice, victims), named after the
// patent claims they exercise where they do.

#include "extender/decisions.h"

#include <gtest/gtest.h>

#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using namespace testing;  // builders and kGiB of testing/fixtures.h

struct Fixture {
  GpuCluster cluster;
  DecisionOptions options;

  void Node(const std::string& name, int gpus, MiB mib, const std::string& model = "A100") {
    cluster.UpsertNode(MakeNode(name, gpus, mib, model));
  }
  void Bound(const std::string& pod, const std::string& node, int64_t whole, MiB mib,
             std::vector<int> gpus = {}, int32_t priority = 0) {
    KubePod p = BoundPod(MakePod(pod, whole, mib), node, std::move(gpus));
    p.priority = priority;
    cluster.UpsertPod(ClaimOf(p, ModelOptions{}));
  }
  std::vector<NodeVerdict> Filter(const KubePod& pod, const std::vector<std::string>& names) {
    return FilterNodes(cluster, MakePodRequest(pod, ModelOptions{}), names, options);
  }
};

TEST(ExtenderDecisions, CN109992422A_Claim1_NodeWithoutEnoughFreeGpuMemoryIsRejectedWithItsReason) {
  Fixture f;
  f.Node("full", 2, 16 * kGiB);
  f.Node("room", 2, 16 * kGiB);
  f.Bound("a", "full", 0, 12 * kGiB, {0});
  f.Bound("b", "full", 0, 10 * kGiB, {1});
  const auto v = f.Filter(MakePod("p", 0, 8 * kGiB), {"full", "room"});
  EXPECT_FALSE(v[0].fits);
  EXPECT_TRUE(v[0].resolvable);  // evicting could free a GPU: FailedNodes, not unresolvable
  EXPECT_EQ(v[0].reason, "gpusched: insufficient GPU memory: no GPU has 8GiB free");
  EXPECT_TRUE(v[1].fits);
}

TEST(ExtenderDecisions, CN109992422A_Claim2_TwoSharesFitOnOneGpuAndTheThirdDoesNot) {
  Fixture f;
  f.Node("n", 1, 16 * kGiB);
  const KubePod p = MakePod("p", 0, 6 * kGiB);
  EXPECT_TRUE(f.Filter(p, {"n"})[0].fits);
  f.Bound("a", "n", 0, 6 * kGiB, {0});
  EXPECT_TRUE(f.Filter(p, {"n"})[0].fits);  // claim 2: a second task shares the GPU
  f.Bound("b", "n", 0, 6 * kGiB, {0});
  EXPECT_FALSE(f.Filter(p, {"n"})[0].fits);  // 4 GiB left
}

TEST(ExtenderDecisions, CN109992422A_Claims3And4_BindPicksTheLeastOccupiedGpuThenTheBestFit) {
  Fixture f;
  f.Node("n", 3, 16 * kGiB);
  f.Bound("a", "n", 0, 8 * kGiB, {0});  // GPU 0 at 50 %
  f.Bound("b", "n", 0, 3 * kGiB, {1});  // GPU 1 at ~20 %
  f.Bound("c", "n", 0, 14 * kGiB, {2});
  const PodRequest r = MakePodRequest(MakePod("p", 0, 2 * kGiB), ModelOptions{});
  auto p = ChooseGpus(f.cluster, r, "n", f.options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->gpus, (std::vector<int>{1}));
  EXPECT_EQ(p->gpu_mem_mib, (std::vector<MiB>{2 * kGiB}));
  const PodRequest big = MakePodRequest(MakePod("q", 0, 10 * kGiB), ModelOptions{});
  EXPECT_EQ(ChooseGpus(f.cluster, big, "n", f.options)->gpus, (std::vector<int>{1}));
  const PodRequest huge = MakePodRequest(MakePod("h", 0, 13 * kGiB), ModelOptions{});
  EXPECT_EQ(ChooseGpus(f.cluster, huge, "n", f.options)->gpus, (std::vector<int>{1}));
  const PodRequest none = MakePodRequest(MakePod("x", 0, 15 * kGiB), ModelOptions{});
  auto refused = ChooseGpus(f.cluster, none, "n", f.options);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "gpusched: insufficient GPU memory: no GPU has 15GiB free");
}

TEST(ExtenderDecisions, CN115981827A_Claim9_PreFilterSeparatesUnschedulableFromUnresolvable) {
  Fixture f;
  f.Node("small", 2, 8 * kGiB);
  f.Node("busy", 2, 16 * kGiB);
  f.Node("h100", 8, 80 * kGiB, "H100");
  f.Node("cpu-only", 0, 0);
  f.Bound("x", "busy", 2, 0);
  KubePod p = MakePod("p", 0, 12 * kGiB);
  auto v = f.Filter(p, {"small", "busy", "cpu-only", "ghost"});
  EXPECT_FALSE(v[0].resolvable);
  EXPECT_EQ(v[0].reason, "gpusched: insufficient GPU memory: every GPU is smaller than 12GiB");
  EXPECT_TRUE(v[1].resolvable);
  EXPECT_FALSE(v[2].resolvable);
  EXPECT_EQ(v[2].reason, "gpusched: node has no GPUs");
  EXPECT_TRUE(v[3].resolvable);  // not in the cache yet
  p.ask.model = "A100";
  v = f.Filter(p, {"h100"});
  EXPECT_FALSE(v[0].resolvable);
  EXPECT_EQ(v[0].reason, "gpusched: no GPU of the requested model (A100)");
  KubePod four = MakePod("four", 4, 0);
  v = f.Filter(four, {"busy", "h100"});
  EXPECT_EQ(v[0].reason, "gpusched: too few GPUs: the pod needs 4, the node has 2");
  EXPECT_TRUE(v[1].fits);
}

TEST(ExtenderDecisions, ReasonsDoNotDependOnPerNodeNumbersSoKubeSchedulerCanCountThem) {
  Fixture f;
  f.Node("a", 4, 16 * kGiB);
  f.Node("b", 4, 16 * kGiB);
  for (int g = 0; g < 4; ++g) f.Bound("a" + std::to_string(g), "a", 0, (10 + g) * kGiB, {g});
  for (int g = 0; g < 4; ++g) f.Bound("b" + std::to_string(g), "b", 0, 15 * kGiB, {g});
  const auto v = f.Filter(MakePod("p", 0, 8 * kGiB), {"a", "b"});
  EXPECT_EQ(v[0].reason, v[1].reason);
}

TEST(ExtenderDecisions, NodeNotReadyTaintsAndBadPodsAreUnresolvable) {
  Fixture f;
  KubeNode down = MakeNode("down", 2, 16 * kGiB);
  down.ready = false;
  f.cluster.UpsertNode(down);
  KubeNode tainted = MakeNode("tainted", 2, 16 * kGiB);
  tainted.taints.push_back({"nvidia.com/gpu", "present", core::TaintEffect::kNoSchedule});
  f.cluster.UpsertNode(tainted);
  auto v = f.Filter(MakePod("p", 1, 0), {"down", "tainted"});
  EXPECT_EQ(v[0].reason, "gpusched: node is not Ready");
  EXPECT_EQ(v[1].reason, "gpusched: untolerated taint");
  EXPECT_FALSE(v[0].resolvable || v[1].resolvable);
  KubePod tolerant = MakePod("t", 1, 0);
  tolerant.tolerations.push_back({"nvidia.com/gpu", "", true, false, {}});
  EXPECT_TRUE(f.Filter(tolerant, {"tainted"})[0].fits);
  KubePod bad = MakePod("bad", 1, 0);
  bad.invalid = "pod default/bad: broken";
  v = f.Filter(bad, {"tainted"});
  EXPECT_EQ(v[0].reason, "gpusched: pod default/bad: broken");
  EXPECT_FALSE(v[0].resolvable);
}

TEST(ExtenderDecisions, PodsWithoutGpuAsksPassEverywhereAndScoreZero) {
  Fixture f;
  f.Node("n", 0, 0);
  const KubePod p = MakePod("p", 0, 0);
  EXPECT_TRUE(f.Filter(p, {"n"})[0].fits);
  const auto s = ScoreNodes(f.cluster, MakePodRequest(p, ModelOptions{}), {"n"}, f.options);
  EXPECT_EQ(s[0].score, 0);
}

TEST(ExtenderDecisions, CN109992422A_Claim4_ScoresPreferEmptierNodesAndGiveRejectedNodesZero) {
  Fixture f;
  f.Node("empty", 4, 16 * kGiB);
  f.Node("half", 4, 16 * kGiB);
  f.Node("full", 1, 16 * kGiB);
  f.Bound("h", "half", 2, 0);
  f.Bound("x", "full", 1, 0);
  const auto s = ScoreNodes(f.cluster, MakePodRequest(MakePod("p", 1, 0), ModelOptions{}),
                            {"empty", "half", "full", "ghost"}, f.options);
  EXPECT_EQ(s[0].host, "empty");
  EXPECT_GT(s[0].score, s[1].score);
  EXPECT_EQ(s[2].score, 0);
  EXPECT_EQ(s[3].score, 0);
  for (const HostScore& h : s) {
    EXPECT_GE(h.score, 0);
    EXPECT_LE(h.score, 10);
  }
}

TEST(ExtenderDecisions, VictimsAreTheMinimalGpuHoldersAndOthersAreKept) {
  Fixture f;
  f.Node("n", 2, 16 * kGiB);
  f.Bound("important", "n", 0, 8 * kGiB, {0}, 100);
  f.Bound("small", "n", 0, 4 * kGiB, {1}, 10);
  f.Bound("big", "n", 0, 12 * kGiB, {1}, 5);
  const PodRequest r = MakePodRequest(MakePod("p", 0, 14 * kGiB), ModelOptions{});
  // kube-scheduler proposes all three (most important first) plus a pod holding no GPU.
  VictimSet proposal{"n", {"uid-default-important", "uid-default-small", "uid-default-big",
                           "uid-default-cpu-only"}, 0};
  const auto kept = ChooseVictims(f.cluster, r, {proposal}, f.options);
  ASSERT_EQ(kept.size(), 1u);
  // GPU 1 (small + big) must be emptied; "important" on GPU 0 is spared.
  EXPECT_EQ(kept[0].victim_uids, (std::vector<std::string>{
                                     "uid-default-small", "uid-default-big", "uid-default-cpu-only"}));
}

TEST(ExtenderDecisions, NodesWhereEvictionFreesNoGpuRoomAreDroppedAndFewestPdbViolationsWin) {
  Fixture f;
  f.Node("stuck", 1, 16 * kGiB);
  f.Node("ok-pdb", 1, 16 * kGiB);
  f.Node("ok", 1, 16 * kGiB);
  f.Bound("s", "stuck", 1, 0);
  f.Bound("a", "ok-pdb", 1, 0);
  f.Bound("b", "ok", 1, 0);
  const PodRequest r = MakePodRequest(MakePod("p", 1, 0), ModelOptions{});
  const std::vector<VictimSet> proposals = {{"ok", {"uid-default-b"}, 0},
                                            {"ok-pdb", {"uid-default-a"}, 1},
                                            {"stuck", {"uid-default-other"}, 0},
                                            {"unknown", {"uid-x"}, 0}};
  const auto kept = ChooseVictims(f.cluster, r, proposals, f.options);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].node, "ok");
  // A pod that asks for no GPU leaves kube-scheduler's proposal alone.
  EXPECT_EQ(ChooseVictims(f.cluster, MakePodRequest(MakePod("c", 0, 0), ModelOptions{}),
                          proposals, f.options)
                .size(),
            proposals.size());
}

}  // namespace
}  // namespace gpusched::extender
