// GPU health: the --fault-file format, the health period, and the scheduler taking an
// unhealthy GPU out at once (its tasks requeued with the fault as the reason) and back
// after the period.

#include <gtest/gtest.h>

#include "core/gpu_health.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;

TEST(GpuFaultParseTest, EveryKindAndCommentsParse) {
  auto faults = ParseGpuFaults("# injected\n1 xid 79\n\n0 ecc 2  # two\n2 ecc\n3 lost\n", 4);
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  ASSERT_EQ(faults->size(), 4u);
  EXPECT_EQ((*faults)[0].gpu, 1);
  EXPECT_EQ((*faults)[0].error, "Xid 79");
  EXPECT_EQ((*faults)[1].error, "ECC uncorrectable errors: 2");
  EXPECT_EQ((*faults)[2].error, "ECC uncorrectable errors: 1");
  EXPECT_EQ((*faults)[3].gpu, 3);
  EXPECT_EQ((*faults)[3].error, "GPU lost");
}

TEST(GpuFaultParseTest, ErrorsNameTheLineFieldAndValue) {
  auto expect_error = [](std::string_view text, const std::string& message) {
    auto faults = ParseGpuFaults(text, 2);
    ASSERT_FALSE(faults.ok()) << text;
    EXPECT_EQ(faults.status().message(), message);
  };
  expect_error("2 xid 79", "fault-file line 1: gpu \"2\" is not a GPU index of this node (0..1)");
  expect_error("\n0 xid 0", "fault-file line 2: xid code \"0\" is not 1..65535");
  expect_error("0 ecc many", "fault-file line 1: ecc count \"many\" is not >= 1");
  expect_error("0 fire", "fault-file line 1: kind \"fire\" with 1 fields: use \"GPU xid CODE\", "
                         "\"GPU ecc [COUNT]\" or \"GPU lost\"");
  expect_error("x lost", "fault-file line 1: gpu \"x\" is not a GPU index of this node (0..1)");
}

TEST(GpuHealthTrackerTest, AFaultTakesTheGpuOutUntilItsChecksPassForThePeriod) {
  GpuHealthTracker tracker(2, 10'000);
  tracker.Fault({1, "Xid 79"}, 1'000);
  EXPECT_FALSE(tracker.Snapshot(1'000)[1].healthy);
  EXPECT_TRUE(tracker.Snapshot(1'000)[0].healthy);
  tracker.Checked(1, /*passed=*/false, 5'000);  // a failed check restarts the period
  EXPECT_FALSE(tracker.Snapshot(14'999)[1].healthy);
  const auto back = tracker.Snapshot(15'000);
  EXPECT_TRUE(back[1].healthy);
  EXPECT_EQ(back[1].last_error, "Xid 79");  // kept after the GPU returns
}

class GpuHealthSchedulerTest : public SchedulerTest {
 protected:
  void SetUp() override { Init(SchedulerConfig{}); }
  Status Health(const std::string& node, std::vector<NodeHeartbeat::GpuHealth> health) {
    NodeHeartbeat hb;
    hb.node = node;
    hb.gpu_health = std::move(health);
    return sched_->HandleNodeHeartbeat(hb);
  }
};

TEST_F(GpuHealthSchedulerTest, AnUnhealthyGpuIsExcludedItsTasksRequeuedAndItReturns) {
  AddNode(MakeNode("a", 2, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(T(id).placement.has_value());
  const int gpu = T(id).placement->gpus[0];
  std::vector<NodeHeartbeat::GpuHealth> health(2);
  health[static_cast<size_t>(gpu)] = {false, "Xid 79"};
  ASSERT_TRUE(Health("a", health).ok());
  // Killed on its GPU and requeued (not a failure of the task) with the fault as the reason.
  auto actions = sched_->TakeActions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Action::Kind::kKill);
  EXPECT_EQ(actions[0].reason, "GPU " + std::to_string(gpu) + " of node a unhealthy: Xid 79");
  EXPECT_EQ(T(id).state, TaskState::kPending);
  EXPECT_EQ(T(id).fail_cnt, 0);
  EXPECT_EQ(sched_->cluster().node(0).gpus[static_cast<size_t>(gpu)].allocated_mib, 0);
  // The next pass puts it on the other GPU, never on the unhealthy one.
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_NE(T(id).placement->gpus[0], gpu);
  // A task that needs both GPUs whole finds only one healthy: GpuHealth says why.
  const TaskId both = Submit(testing::WholeGpuTask(2));
  sched_->Tick();
  EXPECT_FALSE(T(both).placement.has_value());
  auto why = sched_->Explain(both);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->last_report.rejected[kFilterGpuHealth], 1) << why->summary;
  ASSERT_TRUE(sched_->Cancel(both).ok());
  // Healthy again (the agent's period passed): the GPU takes a task that needs it whole.
  health[static_cast<size_t>(gpu)] = {true, "Xid 79"};
  ASSERT_TRUE(Health("a", health).ok());
  EXPECT_EQ(sched_->cluster().node(0).gpus[static_cast<size_t>(gpu)].last_error, "Xid 79");
  const TaskId whole = Submit(testing::WholeGpuTask(1));
  sched_->Tick();
  ASSERT_TRUE(T(whole).placement.has_value());
  EXPECT_EQ(T(whole).placement->gpus[0], gpu);
  ExpectInvariants();
}

TEST_F(GpuHealthSchedulerTest, AHealthReportOfTheWrongSizeIsRefused) {
  AddNode(MakeNode("a", 2, 16 * kGiB));
  const Status s = Health("a", {{false, "Xid 79"}});
  EXPECT_EQ(s.message(), "gpu_health: 1 values for a node with 2 GPUs");
}

}  // namespace
}  // namespace gpusched::core
