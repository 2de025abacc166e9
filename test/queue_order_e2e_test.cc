// Production queue orders end to end (issue 37): a real `gpusched server` with
// `queue_order: las`, one agent with one GPU. The order stops a task that used more than its
// share (requeued in state preempted, not a failure), never stops back within one quantum,
// and a task stopped so gets its --signal, its --grace, and resumes as a checkpointed task
// with GPUSCHED_RESTART_COUNT set.

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

// LAS with one queue threshold at 1 GPU-second and a 4 s quantum: a task that ran 1 s ranks
// behind every newcomer; a run younger than 4 s is never stopped by the order.
class QueueOrderTest : public ClusterTest {
 protected:
  std::string ExtraServerConfig() const override {
    return "queue_order: las\nlas_thresholds: [1s]\norder_quantum: 4s\npreemption_grace: 3s\n";
  }
};

// A runs; B arrives and waits until A's quantum is over, then the order stops A (queue 1)
// for B (queue 0): A is requeued, not failed. One second into its run B is in queue 1 too,
// behind A (first submitted): without the quantum the order would stop B there and give the
// GPU back to A (the two undo each other). B, 1.5 s long, ends untouched; then A resumes.
TEST_F(QueueOrderTest, Issue37_LasRequeuesTheOrdersVictimAndNeverPreemptsBackWithinAQuantum) {
  StartAgent("n1", "1x16GiB");
  const uint64_t a = Submit({"--gpus", "1", "--", "sh", "-c", Gated("a", "exit 0")});
  ASSERT_TRUE(WaitState(a, "running")) << Task(a).dump();
  const uint64_t b = Submit({"--gpus", "1", "--", "sleep", "1.5"});
  ASSERT_TRUE(WaitState(a, "preempted")) << Task(a).dump();
  const Json preempted = Task(a);
  EXPECT_EQ(preempted["fail_cnt"], 0);  // not a failure
  EXPECT_EQ(preempted["preemptions"], 1);
  EXPECT_NE(preempted.dump().find("preempted by the queue order (least-attained)"),
            std::string::npos)
      << preempted.dump();  // in its history
  ASSERT_TRUE(WaitState(b, "succeeded")) << Task(b).dump();
  const Json done = Task(b);
  EXPECT_EQ(done["preemptions"], 0) << done.dump();  // not stopped back within its quantum
  EXPECT_EQ(done["attempts"], 1);
  ASSERT_TRUE(WaitState(a, "running")) << Task(a).dump();
  OpenGate("a");
  ASSERT_TRUE(WaitState(a, "succeeded")) << Task(a).dump();
  const Json resumed = Task(a);
  EXPECT_EQ(resumed["attempts"], 2);
  EXPECT_EQ(resumed["fail_cnt"], 0);
}

// A task submitted with --signal USR1 --grace 5s: the order's preemption sends it SIGUSR1
// (its handler writes a file and exits 0 within the grace), `show` says it checkpointed (and
// --json has `checkpoints`), and its next run has GPUSCHED_RESTART_COUNT=1.
TEST_F(QueueOrderTest, Issue37_PreemptedTaskGetsItsSignalCheckpointsAndResumesWithRestartCount) {
  StartAgent("n1", "1x16GiB");
  const std::string script =
      "echo \"restart=$GPUSCHED_RESTART_COUNT\" >> '" + path("restarts") + "'; " +
      "if [ \"$GPUSCHED_RESTART_COUNT\" = 0 ]; then " +
      "trap \"echo usr1 > '" + path("signal") + "'; exit 0\" USR1; " +
      "trap \"echo term > '" + path("signal") + "'; exit 1\" TERM; " +
      "while :; do sleep 0.05; done; fi; exit 0";
  const uint64_t a = Submit(
      {"--gpus", "1", "--signal", "USR1", "--grace", "5s", "--", "sh", "-c", script});
  ASSERT_TRUE(WaitState(a, "running")) << Task(a).dump();
  const uint64_t b = Submit({"--gpus", "1", "--", "sleep", "0.5"});
  ASSERT_TRUE(WaitState(b, "succeeded")) << Task(b).dump();
  ASSERT_TRUE(WaitState(a, "succeeded")) << Task(a).dump();
  EXPECT_EQ(ReadFile(path("signal")), "usr1\n");
  EXPECT_EQ(ReadFile(path("restarts")), "restart=0\nrestart=1\n");
  const Json t = Task(a);
  EXPECT_EQ(t["checkpoints"], 1) << t.dump();
  EXPECT_EQ(t["checkpointed"], true);
  EXPECT_EQ(t["checkpointed_attempt"], 1);
  EXPECT_EQ(t["attempts"], 2);
  EXPECT_EQ(t["fail_cnt"], 0);
  EXPECT_EQ(t["request"]["signal"], 10) << t.dump();
  const CliResult show = Run({"show", std::to_string(a)});
  EXPECT_NE(show.out.find("checkpointed:"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("attempt 1 exited 0 within its grace"), std::string::npos) << show.out;
  // A signal that cannot be caught is refused, naming the flag and the value.
  const CliResult bad = Run({"submit", "--gpus", "1", "--signal", "KILL", "--", "true"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--signal: 9: SIGKILL cannot be caught"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace gpusched::testing
