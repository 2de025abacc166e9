#include "extender/kube_objects.h"

#include <gtest/gtest.h>

#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

StatusOr<KubePod> PodFrom(const std::string& json) {
  auto doc = JsonDoc::Parse(json, "pod");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return ParsePod(doc->root());
}

StatusOr<KubeNode> NodeFrom(const std::string& json, ParseNodeOptions options = {}) {
  auto doc = JsonDoc::Parse(json, "node");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return ParseNode(doc->root(), options);
}

TEST(KubeObjects, NodeGpuInventoryPrefersGpuschedMemoryThenGpushareThenTheGfdLabel) {
  KubeNode n = *NodeFrom(R"({"metadata":{"name":"n1","labels":{"nvidia.com/gpu.product":"A100",
      "nvidia.com/gpu.memory":"81920","gpusched.io/gpu-model":"A100-80GB"}},
      "status":{"allocatable":{"nvidia.com/gpu":"8","gpusched.io/gpu-mem":"655360"},
      "conditions":[{"type":"Ready","status":"False"}]}})");
  EXPECT_EQ(n.gpu_count, 8);
  EXPECT_EQ(n.resource_mib_per_gpu, 81920);
  EXPECT_EQ(n.label_mib_per_gpu, 81920);
  EXPECT_EQ(n.gpu_model, "A100-80GB");  // gpusched's label overrides GFD's product
  EXPECT_FALSE(n.ready);
  EXPECT_EQ(EffectiveMibPerGpu(n, 1024), 81920);

  const KubeNode share = testing::FixtureNode("object-node-share-v100-node-01.json");
  EXPECT_EQ(share.label_mib_per_gpu, 16384);
  // gpushare pods are accounted in gpushare units, so its 15 GiB wins over the label's 16 GiB.
  EXPECT_EQ(EffectiveMibPerGpu(share, 1024), 15 * 1024);
  EXPECT_TRUE(share.ready);
}

TEST(KubeObjects, NodeWithoutNameIsAnErrorButBadQuantitiesOnlyMarkItInvalid) {
  EXPECT_FALSE(NodeFrom(R"({"metadata":{}})").ok());
  EXPECT_FALSE(NodeFrom(R"([1])").ok());
  KubeNode n = *NodeFrom(R"({"metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"1.5"}}})");
  EXPECT_EQ(n.invalid,
            "node n1: status.allocatable[\"nvidia.com/gpu\"]: \"1.5\" is not a whole number");
}

// Found by fuzz_extender: "8Gi" GPUs (8 x 2^30) made the node invalid but was still kept as
// its count, and GpuCluster then sized a list of 8 Gi GPUs (an out-of-memory abort).
TEST(KubeObjects, AnImplausibleGpuCountMarksTheNodeInvalidAndIsNotKept) {
  KubeNode n = *NodeFrom(
      R"({"metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"8Gi"}}})");
  EXPECT_EQ(n.invalid, "node n1: GPU count 8589934592 is not plausible");
  EXPECT_EQ(n.gpu_count, 0);
  KubeNode most = *NodeFrom(
      R"({"metadata":{"name":"n2"},"status":{"allocatable":{"nvidia.com/gpu":"4096"}}})");
  EXPECT_EQ(most.invalid, "");
  EXPECT_EQ(most.gpu_count, 4096);
}

TEST(KubeObjects, LabelsAreOnlyCopiedWhenAsked) {
  const std::string json = R"({"metadata":{"name":"n","labels":{"zone":"a","nvidia.com/gpu.product":"T4"}}})";
  EXPECT_EQ(NodeFrom(json)->labels.size(), 2u);
  KubeNode lean = *NodeFrom(json, ParseNodeOptions{.keep_labels = false});
  EXPECT_TRUE(lean.labels.empty());
  EXPECT_EQ(lean.gpu_model, "T4");
}

TEST(KubeObjects, PodAsksSumContainersAndTakeTheLargerInitContainer) {
  KubePod p = *PodFrom(R"({"metadata":{"name":"p","namespace":"ns","uid":"u",
      "annotations":{"gpusched.io/gpu-model":"A100","gpusched.io/gpu-indices":"3,1"}},
      "spec":{"priority":7,"nodeName":"n1","containers":[
        {"resources":{"limits":{"nvidia.com/gpu":"2"}}},
        {"resources":{"requests":{"nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"1"}}}],
      "initContainers":[{"resources":{"limits":{"nvidia.com/gpu":"4"}}}],
      "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]},
      "status":{"phase":"Running"}})");
  EXPECT_EQ(p.ask.whole_gpus, 4);
  EXPECT_EQ(p.ask.model, "A100");
  EXPECT_EQ(p.annotated_gpus, (std::vector<int>{1, 3}));
  EXPECT_EQ(p.priority, 7);
  EXPECT_TRUE(p.Active());
  ASSERT_EQ(p.tolerations.size(), 1u);
  EXPECT_TRUE(p.tolerations[0].exists);
  EXPECT_TRUE(p.tolerations[0].has_effect);
}

TEST(KubeObjects, PodAskingForWholeGpusAndMemoryIsInvalidWithAReason) {
  KubePod p = *PodFrom(R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[
      {"resources":{"limits":{"nvidia.com/gpu":"1","gpusched.io/gpu-mem":"4096"}}}]}})");
  EXPECT_NE(p.invalid.find("pod ns/p: the pod asks for whole GPUs"), std::string::npos) << p.invalid;
  KubePod q = *PodFrom(R"({"metadata":{"name":"q","namespace":"ns"},"spec":{"containers":[
      {"resources":{"limits":{"gpusched.io/gpu-mem":"4Gi"}}}]}})");
  EXPECT_EQ(q.invalid,
            "pod ns/q: gpusched.io/gpu-mem: 4294967296 MiB is more than any GPU has (the "
            "resource counts MiB: write 4096 for 4 GiB, not 4Gi)");
  KubePod r = *PodFrom(R"({"metadata":{"name":"r","namespace":"ns"},"spec":{"containers":[
      {"resources":{"limits":{"nvidia.com/gpu":"x"}}}]}})");
  EXPECT_EQ(r.invalid,
            "pod ns/r: spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: \"x\" is not "
            "a Kubernetes quantity (expected a number like 8, 500m, 64Gi)");
}

TEST(KubeObjects, GpushareAnnotationGivesTheIndexWhenGpuschedsIsAbsent) {
  const KubePod after = testing::FixturePod("object-pod-gpumem-8gib-after-bind.json");
  EXPECT_EQ(after.annotated_gpus, (std::vector<int>{0}));
  EXPECT_EQ(after.ask.gpushare_units, 8);
  EXPECT_EQ(SharedMib(after.ask, 1024), 8192);
  EXPECT_EQ(SharedMib(after.ask, 1), 8);
}

TEST(KubeObjects, GpuIndicesParseStrictly) {
  EXPECT_EQ(ParseGpuIndices("0"), (std::vector<int>{0}));
  EXPECT_EQ(ParseGpuIndices("7,2"), (std::vector<int>{2, 7}));
  for (const char* bad : {"", ",", "1,", "a", "1,1", "-1", "4096", "1 ,2"}) {
    EXPECT_FALSE(ParseGpuIndices(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatGpuIndices({0, 3}), "0,3");
}

}  // namespace
}  // namespace gpusched::extender
