// CN110955526B claim 2: tasks are assigned to executors by free memory and free CPUs.

#include "dispatch/chunks/executor_choice.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpusched::chunks {
namespace {

GpuView Gpu(int id, int64_t free_mib) { return GpuView{id, free_mib * kMiB, 1024 * kMiB, 4}; }

TEST(CN110955526B, Claim2_FreeMemoryAndFreeCpuGoesToGpuExecutor) {
  const std::vector<GpuView> gpus{Gpu(0, 10), Gpu(1, 100), Gpu(2, 64)};
  EXPECT_EQ(ChooseExecutor(gpus, 4, {64 * kMiB, 1}), ExecutorDecision(GpuExecutor{2}));
  EXPECT_EQ(ChooseExecutor(gpus, 1, {10 * kMiB, 1}), ExecutorDecision(GpuExecutor{3}));
}

TEST(CN110955526B, Claim2_NoGpuWithFreeMemoryGoesToCpuExecutor) {
  const std::vector<GpuView> gpus{Gpu(0, 10), Gpu(1, 39)};
  const ExecutorDecision d = ChooseExecutor(gpus, 4, {40 * kMiB, 1});
  ASSERT_TRUE(std::holds_alternative<CpuExecutor>(d)) << DescribeDecision(d);
  EXPECT_EQ(DescribeDecision(d), "cpu-executor (no GPU has 41943040 bytes free (most: 40894464))");
  EXPECT_TRUE(std::holds_alternative<CpuExecutor>(ChooseExecutor({}, 4, {1, 1})));
}

TEST(CN110955526B, Claim2_FreeMemoryIsPerGpuNotSummed) {
  // 30 + 30 MiB free on two GPUs is not room for one 40 MiB subtask.
  const std::vector<GpuView> gpus{Gpu(0, 30), Gpu(1, 30)};
  EXPECT_TRUE(std::holds_alternative<CpuExecutor>(ChooseExecutor(gpus, 2, {40 * kMiB, 1})));
}

TEST(CN110955526B, Claim2_NoFreeCpuMeansNoExecutorWhateverTheMemory) {
  const std::vector<GpuView> gpus{Gpu(0, 1000)};
  EXPECT_EQ(ChooseExecutor(gpus, 0, {kMiB, 1}), ExecutorDecision(NoExecutor{"needs 1 CPU(s), 0 free"}));
  EXPECT_EQ(ChooseExecutor(gpus, 1, {kMiB, 2}), ExecutorDecision(NoExecutor{"needs 2 CPU(s), 1 free"}));
  // Nor the CPU executor: it needs CPUs too.
  EXPECT_TRUE(std::holds_alternative<NoExecutor>(ChooseExecutor({}, 0, {kMiB, 1})));
  // Negative free CPUs: no limit.
  EXPECT_TRUE(std::holds_alternative<GpuExecutor>(ChooseExecutor(gpus, -1, {kMiB, 64})));
}

TEST(CN110955526B, Claim2_ExactFitCountsAsFree) {
  const std::vector<GpuView> gpus{Gpu(0, 64)};
  EXPECT_TRUE(std::holds_alternative<GpuExecutor>(ChooseExecutor(gpus, 1, {64 * kMiB, 1})));
  EXPECT_TRUE(std::holds_alternative<CpuExecutor>(ChooseExecutor(gpus, 1, {64 * kMiB + 1, 1})));
}

TEST(ChunkConfigTest, Claim2CpuOptionsAreValidated) {
  ChunkConfig c;
  c.task_cpus = 0;
  EXPECT_EQ(c.Validate().message(), "task_cpus: must be >= 1, got 0");
  c = ChunkConfig{};
  c.free_cpus = -1;
  EXPECT_EQ(c.Validate().message(), "free_cpus: must be >= 0 (0: no limit), got -1");
  c.free_cpus = 1;
  c.task_cpus = 2;
  EXPECT_EQ(c.Validate().message(), "free_cpus: must be 0 or >= task_cpus (2), got 1");
}

}  // namespace
}  // namespace gpusched::chunks
