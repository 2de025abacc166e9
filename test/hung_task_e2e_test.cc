// Hung tasks end to end, with the real binaries (CN109992422A claims 7-8): the agent's task
// heartbeats carry what its executor sees (running, stopped, heartbeat file stale), and the
// server reclaims a task hung for task_timeout (4s here): kills it on its node, frees its
// GPU memory and places the next task there.

#include <signal.h>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class HungTaskTest : public ClusterTest {};

TEST_F(HungTaskTest, CN109992422A_Claim8_SelfStoppedTaskIsReclaimedAndTheNextTaskPlaced) {
  StartAgent("a", "1x16GiB");
  const std::string pid_file = path("hung.pid");
  // No retry, so the GPU can only go to the next task.
  const uint64_t hung = Submit({"--gpu-mem", "12GiB", "--retries", "0", "--", "sh", "-c",
                                "echo $$ > '" + pid_file + "'; kill -STOP $$; echo resumed"});
  ASSERT_TRUE(PollUntil([&] { return Task(hung).value("executor_status", "") == "stopped"; },
                        kDeadline))
      << Task(hung).dump();
  const uint64_t next = Submit({"--gpu-mem", "12GiB", "--", "sh", "-c", Gated("end", "true")});
  EXPECT_EQ(Task(next)["state"], "pending");  // the hung task still holds the GPU
  ASSERT_TRUE(WaitState(hung, "failed")) << Task(hung).dump();
  const Json t = Task(hung);
  EXPECT_NE(t["reason"].get<std::string>().find("task hung on a: stopped"), std::string::npos)
      << t.dump();
  ASSERT_TRUE(WaitState(next, "running")) << Task(next).dump();
  const Json n = Task(next);
  EXPECT_EQ(n["node"], "a");
  EXPECT_EQ(n["gpus"], Json::array({0}));
  // "" until its first task heartbeat.
  EXPECT_TRUE(PollUntil([&] { return Task(next).value("executor_status", "") == "running"; },
                        kDeadline))
      << Task(next).dump();
  // The hung process was killed on the agent (SIGTERM, then SIGKILL after kill_grace).
  const std::string pid = ReadFile(pid_file);
  ASSERT_FALSE(pid.empty());
  EXPECT_TRUE(PollUntil([&] { return kill(std::stoi(pid), 0) != 0; }, kDeadline))
      << "the stopped task " << pid << " still runs";
  EXPECT_EQ(Run({"logs", std::to_string(hung)}).out.find("resumed"), std::string::npos);
  OpenGate("end");
  EXPECT_TRUE(WaitState(next, "succeeded"));
}

TEST_F(HungTaskTest, CN109992422A_Claim8_StaleHeartbeatFileIsReclaimedAFreshOneKept) {
  StartAgent("a", "2x16GiB");
  // Touches its file three times, then goes on without touching it: hung after 1s.
  const uint64_t stale =
      Submit({"--gpus", "1", "--heartbeat-timeout", "1s", "--retries", "0", "--", "sh", "-c",
              "for i in 1 2 3; do touch \"$GPUSCHED_HEARTBEAT_FILE\"; sleep 0.2; done; " +
                  Gated("never", "true")});
  // Touches it all along, until its gate opens.
  const uint64_t fresh = Submit(
      {"--gpus", "1", "--heartbeat-timeout", "1s", "--", "sh", "-c",
       "while [ ! -e '" + path("gate-end") + "' ]; do touch \"$GPUSCHED_HEARTBEAT_FILE\"; [ -d '" +
           dir_.string() + "' ] || exit 1; sleep 0.1; done"});
  ASSERT_TRUE(WaitState(stale, "failed")) << Task(stale).dump();
  const std::string reason = Task(stale)["reason"];
  EXPECT_NE(reason.find("task hung on a: heartbeat file not touched for"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("(heartbeat_timeout 1s)"), std::string::npos) << reason;
  // The fresh one, past the same timeout, runs on and says so.
  const Json f = Task(fresh);
  EXPECT_EQ(f["state"], "running") << f.dump();
  EXPECT_EQ(f["executor_status"], "running");
  EXPECT_GT(f["last_heartbeat_ms"].get<int64_t>(), 0);
  EXPECT_EQ(f["request"]["heartbeat_timeout_ms"], 1000);
  const std::string shown = Run({"show", std::to_string(fresh)}).out;
  EXPECT_NE(shown.find("executor:"), std::string::npos) << shown;
  EXPECT_NE(shown.find("heartbeat file within 1s"), std::string::npos) << shown;
  OpenGate("end");
  EXPECT_TRUE(WaitState(fresh, "succeeded"));
}

}  // namespace
}  // namespace gpusched::testing
