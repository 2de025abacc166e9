// CN110955526B claim 2 across nodes: the driver's plan of a stage's partitions over executors
// by available GPU memory and free CPUs (stage_plan.h), and the REST nodes JSON it reads.
#include "dispatch/chunks/stage_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpusched::chunks {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

std::vector<std::string> Executors(const std::vector<PartitionPlacement>& plan) {
  std::vector<std::string> names;
  for (const PartitionPlacement& p : plan) {
    names.push_back(p.executor + ":" + std::to_string(p.gpu));
  }
  return names;
}

TEST(CN110955526B, Claim2_AcrossNodes_MostFreeGpuMemoryThenChargedPerPartition) {
  // a's GPU 1 has the most memory; b's one GPU comes next; partitions charge what they take.
  const std::vector<ExecutorOffer> executors = {
      {"b", "node-b", {48 * kMiB}, 8},
      {"a", "node-a", {8 * kMiB, 64 * kMiB}, 8},
  };
  auto plan = PlanStage(executors, {.partitions = 4, .subtask_bytes = 16 * kMiB});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // 64 -> a:1 (48 left); 48 vs 48: tie by name -> a:1 (32); 48 -> b:0 (32); 32 vs 32 -> a:1.
  EXPECT_EQ(Executors(*plan), (std::vector<std::string>{"a:1", "a:1", "b:0", "a:1"}));
  EXPECT_EQ((*plan)[0].decision, "gpu-executor (1 GPUs with room)");
}

TEST(CN110955526B, Claim2_AcrossNodes_FreeCpuLimitKeepsAnExecutorOut) {
  const std::vector<ExecutorOffer> executors = {
      {"big-gpu", "n1", {80 * kMiB}, 1},  // the most memory, but one free CPU
      {"small-gpu", "n2", {20 * kMiB}, 4},
  };
  StageDemand demand{.partitions = 2, .subtask_bytes = 16 * kMiB};
  auto no_limit = PlanStage(executors, demand);
  ASSERT_TRUE(no_limit.ok());
  // big-gpu takes the first (its only CPU), small-gpu the second.
  EXPECT_EQ(Executors(*no_limit), (std::vector<std::string>{"big-gpu:0", "small-gpu:0"}));
  demand.min_free_cpus = 2;
  auto limited = PlanStage(executors, demand);
  ASSERT_TRUE(limited.ok());
  // Under the limit big-gpu is never used; small-gpu's GPU has room for one partition, its
  // CPU executor takes the next.
  EXPECT_EQ(Executors(*limited), (std::vector<std::string>{"small-gpu:0", "small-gpu:-1"}));
  EXPECT_EQ((*limited)[1].decision.rfind("cpu-executor", 0), 0u) << (*limited)[1].decision;
}

TEST(CN110955526B, Claim2_AcrossNodes_NoFreeCpuLeavesPartitionsUnassigned) {
  auto plan = PlanStage({{"a", "n", {64 * kMiB}, 1}}, {.partitions = 2, .subtask_bytes = kMiB});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Executors(*plan), (std::vector<std::string>{"a:0", ":-1"}));
}

TEST(CN110955526B, Claim2_AcrossNodes_DeterministicWhateverTheInputOrder) {
  std::vector<ExecutorOffer> executors = {
      {"c", "", {16 * kMiB}, 2}, {"a", "", {16 * kMiB}, 2}, {"b", "", {}, 8}};
  const StageDemand demand{.partitions = 9, .subtask_bytes = 8 * kMiB};
  auto first = PlanStage(executors, demand);
  std::reverse(executors.begin(), executors.end());
  auto second = PlanStage(executors, demand);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(Executors(*first), Executors(*second));
  EXPECT_EQ(Executors(*first), (std::vector<std::string>{"a:0", "c:0", "a:0", "c:0", "b:-1",
                                                         "b:-1", "b:-1", "b:-1", "b:-1"}));
}

TEST(StagePlanTest, RefusesBadInput) {
  EXPECT_FALSE(PlanStage({{"a", "", {}, 1}, {"a", "", {}, 1}}, {.partitions = 1}).ok());
  EXPECT_FALSE(PlanStage({{"", "", {}, 1}}, {.partitions = 1}).ok());
  EXPECT_FALSE(PlanStage({}, {.partitions = 1, .cpus = 0}).ok());
  EXPECT_FALSE(PlanStage({}, {.partitions = 1, .min_free_cpus = -1}).ok());
}

TEST(CN110955526B, Claim2_AcrossNodes_ParsesTheServersNodesJson) {
  const char* json = R"({"nodes": [
    {"name": "n2", "available": true, "free_cpus": 6,
     "gpus": [{"index": 0, "total_mib": 100, "allocated_mib": 40, "free_mib": 60, "healthy": true},
              {"index": 1, "total_mib": 100, "allocated_mib": 0, "healthy": false}]},
    {"name": "n1", "available": true, "gpus": [{"index": 0, "total_mib": 50, "allocated_mib": 20}]},
    {"name": "n3", "available": false, "gpus": []}]})";
  auto executors = ParseNodesJson(json);
  ASSERT_TRUE(executors.ok()) << executors.status().ToString();
  ASSERT_EQ(executors->size(), 2u);  // n3 is not available
  EXPECT_EQ((*executors)[0].name, "n2");
  EXPECT_EQ((*executors)[0].free_cpus, 6);
  EXPECT_EQ((*executors)[0].gpu_free_bytes, (std::vector<int64_t>{60 * kMiB, 0}));
  EXPECT_EQ((*executors)[1].free_cpus, -1);  // the server reports no CPUs: no limit
  EXPECT_EQ((*executors)[1].gpu_free_bytes, (std::vector<int64_t>{30 * kMiB}));
}

TEST(StagePlanTest, NodesJsonErrorsNameTheField) {
  const auto message = [](const char* json) {
    auto r = ParseNodesJson(json);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(message("{"), "nodes: not valid JSON");
  EXPECT_EQ(message(R"({"nodes": 3})"), "nodes: must be an array under the key \"nodes\"");
  EXPECT_EQ(message(R"({"nodes": [{"gpus": []}]})"), "nodes[0].name: must be a non-empty string");
  EXPECT_EQ(message(R"({"nodes": [{"name": "a", "gpus": [{"free_mib": "x"}]}]})"),
            "nodes[0].gpus[0].free_mib: must be an integer");
  EXPECT_EQ(message(R"({"nodes": [{"name": "a", "free_cpus": -1, "gpus": []}]})"),
            "nodes[0].free_cpus: must be an integer in [0, 2^31)");
}

}  // namespace
}  // namespace gpusched::chunks
