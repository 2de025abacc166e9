// Tasks outlive their agent: a runner opened on the journal of one that went away (left its
// tasks, or was killed with -9) adopts the tasks whose shim still runs, reports the exits
// recorded meanwhile, and reports a task whose shim died as lost. Each exit exactly once
// per runner, and again by the next runner until it is acknowledged.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "agent/journal_record.h"
#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

class AdoptionTest : public testing::ExecutorTest {
 protected:
  // Launches `s` in a runner that then stops and leaves it running, as `gpusched agent`
  // does on SIGTERM.
  void LaunchAndLeave(const LaunchSpec& s) {
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    ASSERT_TRUE(runner);
    ASSERT_TRUE(LaunchReady(*runner, s));
    runner->Stop(ShutdownMode::kLeaveTasks);
    EXPECT_TRUE(rec.exits().empty());
  }
  journal::RunRecord RunRecordOf(uint64_t id) {
    journal::RunRecord r;
    EXPECT_TRUE(journal::ParseRun(ReadFile(RecordPath(id, 1, ".run")).c_str(), &r));
    return r;
  }
  // Leaves `s` running, then kills it through a runner that adopted it; returns its exit.
  std::optional<TaskExit> KillAdopted(const LaunchSpec& s, DurationMs grace_ms,
                                      const std::string& reason) {
    LaunchAndLeave(s);
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    runner->Kill(s.id, s.attempt, grace_ms, reason);
    return rec.WaitFor(s.id, s.attempt);
  }
  static bool ProcessGone(pid_t pid) {
    journal::ProcessId id;
    return PollUntil([&] { return !journal::ReadProcessId(pid, &id); });
  }
};

TEST_F(AdoptionTest, TaskLeftRunningIsAdoptedAndItsExitReportedOnce) {
  LaunchSpec s = Gated(1, "gate", "echo after; exit 3");
  LaunchAndLeave(s);
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  EXPECT_EQ(runner->Running(), (std::vector<TaskKey>{{1, 1}}));  // so heartbeats carry it
  EXPECT_TRUE(rec.exits().empty());
  OpenGate("gate");
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(e->reason, "");
  EXPECT_EQ(ReadFile(s.log_path), "ready\nafter\n");  // the same log, across agents
  // A later task's exit comes after any duplicate of the first would have.
  ASSERT_TRUE(runner->Launch(Spec(2, {"true"})).ok());
  ASSERT_TRUE(rec.WaitFor(2, 1));
  EXPECT_EQ(rec.CountOf(1, 1), 1u);
  // A task leaves Running() once its exit callback has returned, a moment after the
  // recorder saw the exit inside it.
  EXPECT_TRUE(PollUntil([&] { return runner->Running().empty(); }));
}

TEST_F(AdoptionTest, TaskSurvivesItsAgentKilledNineAndIsAdopted) {
  LaunchSpec s = Gated(1, "gate", "exit 4");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t agent = fork();
  if (agent == 0) {  // the agent: launches, says so, waits to be killed
    close(ready[0]);
    ExitRecorder rec;
    auto r = ProcessRunner::Open(clock_, Options(), rec.Callback());
    if (!r.ok() || !(*r)->Launch(s).ok() || !WaitReady(s)) _exit(1);
    (void)!write(ready[1], "1", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  kill(agent, SIGKILL);
  ASSERT_EQ(waitpid(agent, nullptr, 0), agent);

  ExitRecorder rec;
  auto runner = OpenRunner(rec);  // the dead agent's journal lock went with it
  ASSERT_TRUE(runner);
  EXPECT_EQ(runner->Running(), (std::vector<TaskKey>{{1, 1}}));
  EXPECT_TRUE(rec.exits().empty());
  OpenGate("gate");
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 4);
  ASSERT_TRUE(runner->Launch(Spec(2, {"true"})).ok());
  ASSERT_TRUE(rec.WaitFor(2, 1));
  EXPECT_EQ(rec.CountOf(1, 1), 1u);
}

TEST_F(AdoptionTest, AdoptedTaskCanBeKilled) {
  auto e = KillAdopted(Gated(1, "never", "exit 0"), 60'000, "cancelled by user");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 128 + SIGTERM);
  EXPECT_EQ(e->reason, "killed: cancelled by user");
}

TEST_F(AdoptionTest, AdoptedTaskIgnoringSigtermIsKilledAfterGrace) {
  auto e = KillAdopted(
      Spec(1, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}), 200,
      "drained");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 128 + SIGKILL);
  EXPECT_EQ(e->reason, "killed: drained");
}

TEST_F(AdoptionTest, StopKillingTasksKillsAdoptedOnesToo) {
  LaunchSpec s = Spec(1, {"sh", "-c", "trap '' TERM; echo ready; exec sleep 600"});
  LaunchAndLeave(s);
  const journal::RunRecord run = RunRecordOf(1);
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  runner->Stop(ShutdownMode::kKillTasks);
  EXPECT_TRUE(ProcessGone(run.task_pgid));
  EXPECT_NE(ReadFile(RecordPath(1, 1, ".exit")).find("exit_code=137\n"), std::string::npos);
}

TEST_F(AdoptionTest, ExitRecordedWhileNoAgentRanIsReportedByTheNextUntilAcknowledged) {
  LaunchSpec s = Gated(1, "gate", "exit 5");
  LaunchAndLeave(s);
  const journal::RunRecord run = RunRecordOf(1);
  OpenGate("gate");
  ASSERT_EQ(waitpid(run.shim.pid, nullptr, 0), run.shim.pid);  // our child: it ended
  ASSERT_TRUE(Exists(RecordPath(1, 1, ".exit")));
  {
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    ASSERT_EQ(rec.exits().size(), 1u);  // reported before Open returned
    EXPECT_EQ(rec.exits()[0].exit_code, 5);
    EXPECT_TRUE(runner->Running().empty());
  }
  ExitRecorder again;
  auto runner = OpenRunner(again);
  ASSERT_EQ(again.exits().size(), 1u);  // not acknowledged: reported again
  runner->Acknowledge(1, 1);
  EXPECT_FALSE(Exists(RecordPath(1, 1, ".exit")));
  EXPECT_FALSE(Exists(RecordPath(1, 1, ".run")));
  runner.reset();
  ExitRecorder after_ack;
  runner = OpenRunner(after_ack);
  EXPECT_TRUE(after_ack.exits().empty());
}

TEST_F(AdoptionTest, OnlyUnacknowledgedExitsAreReportedAgain) {
  {
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    ASSERT_TRUE(runner->Launch(Spec(1, {"true"})).ok());
    ASSERT_TRUE(runner->Launch(Spec(2, {"sh", "-c", "exit 2"})).ok());
    ASSERT_TRUE(rec.WaitFor(1, 1));
    ASSERT_TRUE(rec.WaitFor(2, 1));
    runner->Acknowledge(1, 1);
  }
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_EQ(rec.exits().size(), 1u);
  EXPECT_EQ(rec.exits()[0].id, 2u);
  EXPECT_EQ(rec.exits()[0].exit_code, 2);
}

TEST_F(AdoptionTest, TaskWhoseShimDiedWhileNoAgentRanIsReportedLostOnceAndKilled) {
  LaunchSpec s = Spec(1, {"sh", "-c", "echo ready; exec sleep 600"});
  LaunchAndLeave(s);
  const journal::RunRecord run = RunRecordOf(1);
  kill(run.shim.pid, SIGKILL);
  ASSERT_EQ(waitpid(run.shim.pid, nullptr, 0), run.shim.pid);
  {
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    ASSERT_EQ(rec.exits().size(), 1u);
    EXPECT_EQ(rec.exits()[0].exit_code, -1);
    EXPECT_EQ(rec.exits()[0].reason, "the task's supervisor died");
    EXPECT_TRUE(runner->Running().empty());
    EXPECT_TRUE(ProcessGone(run.task_pgid)) << "the unsupervised task still runs";
    // Later exits do not bring it back.
    ASSERT_TRUE(runner->Launch(Spec(2, {"true"})).ok());
    ASSERT_TRUE(rec.WaitFor(2, 1));
    EXPECT_EQ(rec.CountOf(1, 1), 1u);
    runner->Acknowledge(2, 1);
  }
  ExitRecorder again;
  auto runner = OpenRunner(again);  // the same report until acknowledged
  ASSERT_EQ(again.exits().size(), 1u);
  EXPECT_EQ(again.exits()[0].exit_code, -1);
  EXPECT_EQ(again.exits()[0].reason, "the task's supervisor died");
}

TEST_F(AdoptionTest, ShimKilledUnderARunningRunnerIsReportedLost) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(1, {"sh", "-c", "echo ready; exec sleep 600"});
  ASSERT_TRUE(LaunchReady(*runner, s));
  const journal::RunRecord run = RunRecordOf(1);
  kill(run.shim.pid, SIGKILL);
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, -1);
  EXPECT_EQ(e->reason, "the task's supervisor died");
  EXPECT_TRUE(ProcessGone(run.task_pgid));
  ASSERT_TRUE(runner->Launch(Spec(2, {"true"})).ok());
  ASSERT_TRUE(rec.WaitFor(2, 1));
  EXPECT_EQ(rec.CountOf(1, 1), 1u);
}

TEST_F(AdoptionTest, ReusedPidIsNeitherAdoptedNorKilled) {
  // A live process leading its own group stands for whatever a reused pid names now. The
  // records name it by pid, but with another start time (pid reused since) or another boot
  // (the node rebooted): it must be neither adopted nor, as the lost task's group, killed.
  const pid_t stranger = fork();
  if (stranger == 0) {
    setpgid(0, 0);
    for (;;) pause();
  }
  setpgid(stranger, stranger);
  journal::ProcessId id;
  ASSERT_TRUE(PollUntil([&] { return journal::ReadProcessId(stranger, &id); }));
  std::filesystem::create_directories(journal_dir());
  for (int variant = 1; variant <= 2; ++variant) {
    journal::RunRecord r;
    r.shim = id;
    r.task_pgid = stranger;
    r.task_start_ticks = id.start_ticks;
    if (variant == 1) {
      r.shim.start_ticks = r.task_start_ticks = id.start_ticks + 1;
    } else {
      std::snprintf(r.shim.boot_id, sizeof r.shim.boot_id, "%s", "another-boot");
    }
    char text[512];
    const size_t len = journal::FormatRun(r, text, sizeof text);
    std::ofstream(RecordPath(variant, 1, ".run")) << std::string(text, len);
  }
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_EQ(rec.exits().size(), 2u);
  EXPECT_EQ(rec.exits()[0].exit_code, -1);
  EXPECT_EQ(rec.exits()[1].exit_code, -1);
  EXPECT_TRUE(runner->Running().empty());
  EXPECT_EQ(waitpid(stranger, nullptr, WNOHANG), 0) << "a reused pid's process was killed";
  kill(stranger, SIGKILL);
  waitpid(stranger, nullptr, 0);
}

TEST_F(AdoptionTest, ExitLinesOfAShimThatDiedBeforeSealingAreReported) {
  // Task 1's shim appended (and fsynced) its exit lines but died before renaming its .run
  // to .exit; task 2's died while appending them: torn lines do not count.
  {
    ExitRecorder rec;
    auto runner = OpenRunner(rec);
    for (uint64_t id : {1, 2}) {
      ASSERT_TRUE(LaunchReady(*runner, Spec(id, {"sh", "-c", "echo ready; exec sleep 600"})));
    }
    runner->Stop(ShutdownMode::kLeaveTasks);
  }
  for (uint64_t id : {1, 2}) {
    const journal::RunRecord run = RunRecordOf(id);
    kill(run.shim.pid, SIGKILL);  // first, or it would seal its task's death
    ASSERT_EQ(waitpid(run.shim.pid, nullptr, 0), run.shim.pid);
    kill(-run.task_pgid, SIGKILL);
  }
  std::ofstream(RecordPath(1, 1, ".run"), std::ios::app)
      << "exit_code=3\nreason=\nfinished_ms=1\nexit_end=1\n";
  std::ofstream(RecordPath(2, 1, ".run"), std::ios::app) << "exit_code=3\nrea";
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_EQ(rec.exits().size(), 2u);
  EXPECT_EQ(rec.exits()[0].exit_code, 3);
  EXPECT_EQ(rec.exits()[1].exit_code, -1);
  EXPECT_EQ(rec.exits()[1].reason, "the task's supervisor died");
}

TEST_F(AdoptionTest, CorruptRunRecordIsReportedLost) {
  std::filesystem::create_directories(journal_dir());
  std::ofstream(RecordPath(7, 2, ".run")) << "garbage";
  std::ofstream(path("journal/not-a-record")) << "ignored";
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_EQ(rec.exits().size(), 1u);
  EXPECT_EQ(rec.exits()[0].id, 7u);
  EXPECT_EQ(rec.exits()[0].attempt, 2);
  EXPECT_EQ(rec.exits()[0].exit_code, -1);
}

TEST_F(AdoptionTest, SecondRunnerOnTheSameJournalIsRefused) {
  ExitRecorder rec;
  auto first = OpenRunner(rec);
  auto second = ProcessRunner::Open(clock_, Options(), rec.Callback());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another agent"), std::string::npos);
  first->Stop(ShutdownMode::kLeaveTasks);  // releases the lock
  EXPECT_TRUE(ProcessRunner::Open(clock_, Options(), rec.Callback()).ok());
}

}  // namespace
}  // namespace gpusched::agent
