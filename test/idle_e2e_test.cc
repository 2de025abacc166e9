// Idle allocations end to end, with the real binaries: task heartbeats carry each task's GPU
// use (CN109992422A claim 7; simulated GPUs: what the task writes to
// $GPUSCHED_SIM_GPU_UTIL_FILE), and the server flags, or stops, a task idle past idle_after.

#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class IdleClusterTest : public ClusterTest {
 protected:
  // The fixture's server again, with idle_after 1s and the given idle_action.
  void RestartWithIdle(const std::string& action) {
    server_.Kill(SIGTERM);
    WriteFile(path("server.yaml"),
              ReadFile(path("server.yaml")) + "idle_after: 1s\nidle_action: " + action + "\n");
    StartServer();
  }
};

TEST_F(IdleClusterTest, CN109992422A_Claim7_TaskAtZeroPercentIsFlaggedInLsAndShow) {
  RestartWithIdle("flag");
  StartAgent("a", "2x16GiB");
  const uint64_t idle = Submit({"--gpus", "1", "--", "sh", "-c",
                                "echo '0 256' > \"$GPUSCHED_SIM_GPU_UTIL_FILE\"; " +
                                    Gated("end", "true")});
  const uint64_t busy = Submit({"--gpus", "1", "--", "sh", "-c",
                                "echo 90 > \"$GPUSCHED_SIM_GPU_UTIL_FILE\"; " +
                                    Gated("end", "true")});
  ASSERT_TRUE(PollUntil([&] { return Tasks()[idle].value("idle", false); }, kDeadline))
      << Tasks()[idle].dump();
  const Json t = Tasks()[idle];
  EXPECT_EQ(t["state"], "running");
  EXPECT_EQ(t["gpu_util"], 0);
  EXPECT_EQ(t["gpu_mem_used_mib"], 256);
  EXPECT_GT(t["idle_since_ms"].get<int64_t>(), 0);
  std::this_thread::sleep_for(1500ms);  // the busy task, though past idle_after, is not idle
  const Json b = Task(busy);
  EXPECT_EQ(b["idle"], false) << b.dump();
  EXPECT_EQ(b["gpu_util"], 90) << b.dump();
  const std::string table = Run({"ls"}).out;
  EXPECT_NE(table.find("running (idle)"), std::string::npos) << table;
  const std::string shown = Run({"show", std::to_string(idle)}).out;
  EXPECT_NE(shown.find("yes (0 % since"), std::string::npos) << shown;
  OpenGate("end");
  ASSERT_TRUE(WaitState(idle, "succeeded"));  // flag only: it ran to its end
  EXPECT_TRUE(Task(idle)["gpu_util"].is_null());  // GPU use is of running tasks only
}

TEST_F(IdleClusterTest, CN109992422A_Claim7_StopPolicyEndsAnIdleTaskFailedWithTheReason) {
  RestartWithIdle("stop");
  StartAgent("a", "1x16GiB");
  // Writes nothing to its utilisation file: 0 %, like a task that never touches its GPU.
  const uint64_t id = Submit({"--gpus", "1", "--", "sh", "-c", Gated("never", "true")});
  ASSERT_TRUE(WaitState(id, "failed")) << Task(id).dump();
  const Json t = Task(id);
  EXPECT_EQ(t["reason"], "idle: 0 % GPU utilisation for 1s");
  EXPECT_EQ(t["attempts"], 1);  // not retried
}

}  // namespace
}  // namespace gpusched::testing
