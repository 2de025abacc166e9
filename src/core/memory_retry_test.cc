// Cause-aware retry: a task that failed for GPU memory (an allocation refused by the share
// library, the watchdog, CUDA out of memory) retries with a larger estimate and the
// CN109992422A claim 1 table learns that the share was too small; other failures retry
// unchanged.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;

class MemoryRetryTest : public SchedulerTest {
 protected:
  void SetUp() override { Init(SchedulerConfig{}); }
  // Runs `id`'s current attempt and reports its failure.
  void FailRunning(TaskId id, bool gpu_mem_exceeded, MiB peak = 0) {
    sched_->Tick();
    StartAssigned();
    ASSERT_TRUE(T(id).placement.has_value());
    ASSERT_TRUE(sched_->TaskFinished(id, T(id).attempts, 1, peak, "exited with code 1",
                                     {.gpu_mem_exceeded = gpu_mem_exceeded})
                    .ok());
  }
};

TEST_F(MemoryRetryTest, AMemoryFailureRetriesWithTheShareGrownByHalf) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(4 * kGiB));
  FailRunning(id, /*gpu_mem_exceeded=*/true);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 6 * kGiB);
  EXPECT_EQ(T(id).mem_source, "grown");
  EXPECT_EQ(T(id).reason,
            "exited with code 1 (GPU memory share exceeded; retried with 6GiB instead of 4GiB); "
            "retry 1 of 3 from the retry queue within 30s");
  AdvanceAlive(sched_->config().t2_ms);
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->gpu_mem_mib[0], 6 * kGiB);  // the retry holds the larger share
  ExpectInvariants();
}

TEST_F(MemoryRetryTest, OtherFailuresRetryWithTheSameShare) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(4 * kGiB));
  FailRunning(id, /*gpu_mem_exceeded=*/false);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 4 * kGiB);
  EXPECT_EQ(T(id).mem_source, "explicit");
  EXPECT_EQ(T(id).reason, "exited with code 1; retry 1 of 3 from the retry queue within 30s");
}

TEST_F(MemoryRetryTest, TheLastFailureHasNoRetryToGrowFor) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  TaskSpec spec = SharedTask(4 * kGiB);
  spec.max_retries = 0;
  const TaskId id = Submit(spec);
  FailRunning(id, true);
  EXPECT_EQ(T(id).state, TaskState::kFailed);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 4 * kGiB);
  EXPECT_EQ(T(id).reason,
            "exited with code 1 (GPU memory share exceeded) (failed 1 time, 0 retries allowed)");
}

TEST_F(MemoryRetryTest, GrowthIsAtLeastThePeakPlusHeadroomAndAtMostTheLargestGpu) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(4 * kGiB));
  FailRunning(id, true, /*peak=*/8 * kGiB);  // the watchdog saw 8 GiB
  EXPECT_EQ(T(id).gpu_mem_need_mib, 8 * kGiB + (8 * kGiB * 10 + 99) / 100);
  const TaskId big = Submit(SharedTask(12 * kGiB));
  AdvanceAlive(sched_->config().t2_ms);
  ASSERT_TRUE(sched_->Cancel(id).ok());
  FailRunning(big, true);
  EXPECT_EQ(T(big).gpu_mem_need_mib, 16 * kGiB);  // 18 GiB capped at the largest GPU
}

TEST_F(MemoryRetryTest, CN109992422A_Claim1_TheTableLearnsTheShareWasTooSmall) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->memory_table().AddRow({{"classify", "resnet50", 32, 224, 224}, 5000}).ok());
  TaskSpec spec;
  spec.gpus = 1;
  spec.profile = MemoryProfile{"classify", "resnet50", 32, 224, 224};
  const TaskId id = Submit(spec);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 5000);
  FailRunning(id, true);
  EXPECT_EQ(T(id).gpu_mem_need_mib, 7500);
  // The next task of the profile starts above the share that failed (5000 + 10 % headroom).
  const TaskId next = Submit(spec);
  EXPECT_EQ(T(next).gpu_mem_need_mib, 5500);
  EXPECT_EQ(T(next).mem_source, "learned");
}

}  // namespace
}  // namespace gpusched::core
