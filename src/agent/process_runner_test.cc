#include "agent/process_runner.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <filesystem>
#include <future>
#include <fstream>
#include <sstream>

#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

class ProcessRunnerTest : public testing::ExecutorTest {};

TEST_F(ProcessRunnerTest, ExitCodeEnvironmentAndLog) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(1, {"sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES; echo err >&2; exit 7"});
  s.env["CUDA_VISIBLE_DEVICES"] = "2,5";
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 7);
  EXPECT_EQ(e->reason, "");
  EXPECT_EQ(ReadFile(s.log_path), "gpus=2,5\nerr\n");
  EXPECT_TRUE(runner->Running().empty());
}

// bench chaos saw a task run twice: the agent registered (its stream had broken with a
// server restart) while the exit of a task was between the executor and its report, so the
// registration named the task neither running nor finished, and the server placed it again.
TEST_F(ProcessRunnerTest, DoubleRun_ATaskStaysRunningUntilItsExitCallbackReturns) {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  auto r = ProcessRunner::Open(clock_, Options(), [&](const TaskExit&) {
    entered.set_value();
    released.wait();  // the agent queueing the report
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::unique_ptr<ProcessRunner> runner = std::move(r).value();
  ASSERT_TRUE(runner->Launch(Spec(1, {"true"})).ok());
  entered.get_future().wait();
  EXPECT_EQ(runner->Running(), (std::vector<TaskKey>{{1, 1}}));  // ended, not reported yet
  release.set_value();
  EXPECT_TRUE(PollUntil([&] { return runner->Running().empty(); }));
}

TEST_F(ProcessRunnerTest, TaskLeadsItsOwnProcessGroupUnderItsShim) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(2, {"sh", "-c", "ps -o pgid=,sid= -p $$; echo $$"});
  ASSERT_TRUE(runner->Launch(s).ok());
  ASSERT_TRUE(rec.WaitFor(2, 1));
  std::istringstream lines(ReadFile(s.log_path));
  pid_t pgid = 0, sid = 0, pid = 0;
  lines >> pgid >> sid >> pid;
  EXPECT_EQ(pgid, pid);  // the task leads its own group, so kill(-pgid) reaches its children
  EXPECT_NE(sid, getsid(0));  // the shim's session, not the agent's
  EXPECT_NE(pgid, getpgid(0));
}

// gpusched-shim turns its --ld-preload into the task's LD_PRELOAD (the agent's share library
// must never load into the shim itself) and pins the task to its --cpus (its GPUs' NUMA node);
// the same names in the task's environment decide nothing (issue 35).
TEST_F(ProcessRunnerTest, TheShimGivesTheTaskItsPreloadAndItsCpus) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(3, {"sh", "-c",
                          "echo \"[$LD_PRELOAD][${GPUSCHED_TASK_LD_PRELOAD-unset}]\"; "
                          "grep Cpus_allowed_list /proc/self/status"});
  s.ld_preload = "libc.so.6";  // harmless to preload
  s.cpus = std::to_string(cpu);
  s.env["GPUSCHED_TASK_LD_PRELOAD"] = "libm.so.6";
  s.env["GPUSCHED_TASK_CPUS"] = "0-1023";
  ASSERT_TRUE(runner->Launch(s).ok());
  ASSERT_TRUE(rec.WaitFor(3, 1));
  EXPECT_EQ(ReadFile(s.log_path),
            "[libc.so.6][unset]\nCpus_allowed_list:\t" + std::to_string(cpu) + "\n");
}

// Issue 35: the task's GPU-memory share reaches it as a file it cannot change, on the fixed
// descriptor the preload library reads (preload/share_file.h); a link planted where the
// file goes is replaced, not followed.
TEST_F(ProcessRunnerTest, Issue35_TheTaskGetsItsShareOnAReadOnlyDescriptor) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(7, {"sh", "-c",
                          "cat <&4; stat -L -c '%a %u' /proc/self/fd/4; "
                          "(echo x >&4) 2>/dev/null || echo not-writable"});
  s.gpu_share_mib = "100,200";
  std::filesystem::create_directories(path("logs"));
  std::ofstream(path("victim")) << "keep\n";
  std::filesystem::create_symlink(path("victim"), s.log_path + ".share");
  ASSERT_TRUE(runner->Launch(s).ok());
  ASSERT_TRUE(rec.WaitFor(7, 1));
  EXPECT_EQ(ReadFile(s.log_path), "gpusched-share 1\n100,200\n400 " + std::to_string(geteuid()) +
                                      "\nnot-writable\n");
  EXPECT_EQ(ReadFile(path("victim")), "keep\n");
  EXPECT_FALSE(std::filesystem::is_symlink(s.log_path + ".share"));
}

TEST_F(ProcessRunnerTest, UnknownCommandIsNotFound) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  Status s = runner->Launch(Spec(3, {"gpusched-no-such-program"}));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("gpusched-no-such-program"), std::string::npos);
}

TEST_F(ProcessRunnerTest, TaskRunsInItsWorkdirAndAMissingOneIsNotFound) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  std::filesystem::create_directories(path("wd"));
  std::ofstream(path("wd/run.sh")) << "pwd -P\n";
  LaunchSpec s = Spec(5, {"sh", "run.sh"});
  s.workdir = path("wd");
  ASSERT_TRUE(runner->Launch(s).ok());
  ASSERT_TRUE(rec.WaitFor(5, 1));
  EXPECT_EQ(ReadFile(s.log_path), std::filesystem::canonical(path("wd")).string() + "\n");
  LaunchSpec missing = Spec(6, {"true"});
  missing.workdir = path("no-such-dir");
  Status st = runner->Launch(missing);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("workdir"), std::string::npos) << st.message();
}

TEST_F(ProcessRunnerTest, LaunchOfARunningTaskIsAlreadyExistsAndStartsNothing) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Gated(4, "gate", "echo second-run-would-show >> " + path("runs") + "; exit 0");
  ASSERT_TRUE(runner->Launch(s).ok());
  EXPECT_EQ(runner->Launch(s).code(), StatusCode::kAlreadyExists);
  OpenGate("gate");
  ASSERT_TRUE(rec.WaitFor(4, 1));
  EXPECT_EQ(ReadFile(path("runs")), "second-run-would-show\n");  // once
}

TEST_F(ProcessRunnerTest, KillSendsSigtermToTheTask) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Gated(5, "never", "exit 0");
  ASSERT_TRUE(LaunchReady(*runner, s));
  runner->Kill(5, 1, 60'000, "cancelled by user");  // a grace the test would not outlast
  auto e = rec.WaitFor(5, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 128 + SIGTERM);
  EXPECT_EQ(e->reason, "killed: cancelled by user");
}

TEST_F(ProcessRunnerTest, KillEscalatesToSigkillAfterGrace) {
  // The task ignores SIGTERM; only SIGKILL after the grace period ends it.
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(6, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(LaunchReady(*runner, s));
  runner->Kill(6, 1, 200, "cancelled by user");
  auto e = rec.WaitFor(6, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 128 + SIGKILL);
  EXPECT_EQ(e->reason, "killed: cancelled by user");
  // The journal says the same, should the agent restart before the server has it.
  EXPECT_NE(ReadFile(RecordPath(6, 1, ".exit")).find("reason=killed: cancelled by user"),
            std::string::npos);
}

TEST_F(ProcessRunnerTest, KillOfATaskNotRunningIsIgnored) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  runner->Kill(99, 1, 0, "nothing");
  ASSERT_TRUE(runner->Launch(Spec(7, {"true"})).ok());
  ASSERT_TRUE(rec.WaitFor(7, 1));
  EXPECT_EQ(rec.CountOf(99, 1), 0u);
}

TEST_F(ProcessRunnerTest, ExitStaysInTheJournalUntilAcknowledged) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_TRUE(runner->Launch(Spec(8, {"true"})).ok());
  ASSERT_TRUE(rec.WaitFor(8, 1));
  const std::string record = ReadFile(RecordPath(8, 1, ".exit"));
  EXPECT_NE(record.find("exit_code=0\n"), std::string::npos) << record;
  EXPECT_NE(record.find("shim_pid="), std::string::npos) << record;  // the sealed .run
  runner->Acknowledge(8, 1);
  EXPECT_FALSE(Exists(RecordPath(8, 1, ".run")));
  EXPECT_FALSE(Exists(RecordPath(8, 1, ".exit")));
}

TEST_F(ProcessRunnerTest, AcknowledgeOfARunningTaskKeepsItsRecord) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Gated(9, "gate", "exit 0");
  ASSERT_TRUE(LaunchReady(*runner, s));
  runner->Acknowledge(9, 1);
  EXPECT_TRUE(Exists(RecordPath(9, 1, ".run")));
  OpenGate("gate");
  ASSERT_TRUE(rec.WaitFor(9, 1));
}

TEST_F(ProcessRunnerTest, StopKillingTasksEndsThemAndJournalsTheirExit) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(10, {"sh", "-c", "trap '' TERM; echo $$; echo ready; sleep 600"});
  ASSERT_TRUE(LaunchReady(*runner, s));
  const pid_t task = std::stoi(ReadFile(s.log_path));
  runner->Stop(ShutdownMode::kKillTasks);
  EXPECT_NE(kill(task, 0), 0);  // the shim reaped it before it exited
  EXPECT_EQ(rec.CountOf(10, 1), 0u);  // not reported: stopped
  EXPECT_NE(ReadFile(RecordPath(10, 1, ".exit")).find("exit_code=137\n"), std::string::npos);
  EXPECT_EQ(runner->Launch(Spec(11, {"true"})).code(), StatusCode::kUnavailable);
}

TEST_F(ProcessRunnerTest, MissingShimIsAClearErrorAtOpen) {
  ExitRecorder rec;
  ProcessRunnerOptions o = Options();
  o.shim_path = path("no-such-shim");
  auto r = ProcessRunner::Open(clock_, o, rec.Callback());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-shim"), std::string::npos);
  EXPECT_NE(r.status().message().find("task supervisor"), std::string::npos);
}

TEST_F(ProcessRunnerTest, ManyShortTasksAllReportedOnce) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  constexpr int kTasks = 100;
  for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(runner->Launch(Spec(100 + i, {"true"})).ok());
  ASSERT_TRUE(PollUntil([&] { return rec.exits().size() >= kTasks; }));
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(rec.CountOf(100 + i, 1), 1u) << i;
  // Running() lets a task go once its exit callback has returned, just after the recorder.
  EXPECT_TRUE(PollUntil([&] { return runner->Running().empty(); }));
}

// Issue 40: a grace above 24.8 days (INT_MAX ms) made the poll timeout negative, which waits
// forever, so the SIGKILL never came. The old expression, static_cast<int>(25 days) + 1, is
// negative; the wait is now positive and at most a day (asked again after it).
TEST(PollTimeoutTest, Issue40_KillGraceAboveInt32MillisecondsStillWakesForTheKill) {
  const TimeMs now = 1'000'000;
  const TimeMs days25 = 25LL * 86'400'000;
  EXPECT_LT(static_cast<int>(days25) + 1, 0);  // what the runner computed before
  EXPECT_EQ(PollTimeoutUntil(now + days25, now), 86'400'001);
  EXPECT_EQ(PollTimeoutUntil(now + 366LL * 86'400'000, now), 86'400'001);
  EXPECT_EQ(PollTimeoutUntil(now + 250, now), 251);
  EXPECT_EQ(PollTimeoutUntil(now - 5, now), 1);  // past: at once
}

}  // namespace
}  // namespace gpusched::agent
