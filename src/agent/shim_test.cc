// gpusched-shim on its own: started as the agent starts it, checked through its journal
// records, its exit status and its status pipe.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "agent/journal_record.h"
#include "agent/rank_launcher.h"
#include "agent/runner_test_support.h"
#include "agent/shim_spawner.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

class ShimTest : public testing::ExecutorTest {
 protected:
  void SetUp() override {
    ExecutorTest::SetUp();
    std::filesystem::create_directories(journal_dir());
  }
  // Starts the shim for task (id, 1) with its leading `options` and `argv` (argv[0] is
  // resolved through PATH by the test), output to the task's log, fd 3 to a status pipe
  // (`socket`: a status socket, as the agent gives it). Returns the shim's pid.
  pid_t StartShim(uint64_t id, const std::vector<std::string>& argv, const std::string& journal,
                  const std::vector<std::string>& options = {}, bool socket = false) {
    log_ = path("logs/shim" + std::to_string(id) + ".log");
    int status[2];
    EXPECT_EQ(socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, status)
                     : pipe2(status, O_CLOEXEC),
              0);
    std::vector<std::string> args = options;
    args.insert(args.begin(), GPUSCHED_SHIM);
    for (const std::string& a : {journal, std::to_string(id), std::string("1"),
                                 *ResolveProgram(argv[0])}) {
      args.push_back(a);
    }
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> raw;
    for (std::string& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      const int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(log, 1);
      dup2(log, 2);
      if (status[1] == 3) {
        fcntl(3, F_SETFD, 0);
      } else {
        dup2(status[1], 3);
      }
      execv(raw[0], raw.data());
      _exit(126);
    }
    close(status[1]);
    status_fd_ = status[0];
    return pid;
  }
  // Waits for the shim (killing it, and failing, past the deadline); returns its wait
  // status.
  int WaitShim(pid_t pid) {
    int status = 0;
    if (!PollUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; })) {
      ADD_FAILURE() << "the shim did not end";
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    return status;
  }
  std::string StatusPipe() {
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(status_fd_, buf, sizeof buf)) > 0;) out.append(buf, n);
    close(status_fd_);
    return out;
  }
  journal::ExitRecord ExitRecordOf(uint64_t id) {
    journal::ExitRecord r;
    EXPECT_TRUE(journal::ParseExit(ReadFile(RecordPath(id, 1, ".exit")).c_str(), &r));
    return r;
  }
  // The run lines, from the sealed record (.exit) once the task has ended.
  journal::RunRecord RunRecordOf(uint64_t id) {
    journal::RunRecord r;
    EXPECT_TRUE(journal::ParseRun(ReadFile(RecordPath(id, 1, ".exit")).c_str(), &r));
    return r;
  }

  std::string log_;
  int status_fd_ = -1;
};

TEST_F(ShimTest, NormalExitIsJournaledAndBecomesTheShimsExitCode) {
  const pid_t shim = StartShim(1, {"sh", "-c", "echo hello"}, journal_dir());
  const int status = WaitShim(shim);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const journal::ExitRecord e = ExitRecordOf(1);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_STREQ(e.reason, "");
  EXPECT_GT(e.finished_ms, 0);
  const journal::RunRecord r = RunRecordOf(1);
  EXPECT_EQ(r.shim.pid, shim);
  EXPECT_GT(r.task_pgid, 0);
  EXPECT_NE(r.task_pgid, shim);
  EXPECT_EQ(ReadFile(log_), "hello\n");
  EXPECT_EQ(StatusPipe(), "");  // nothing to complain about
  EXPECT_FALSE(Exists(RecordPath(1, 1, ".run")));  // sealed: renamed to .exit
  EXPECT_FALSE(Exists(RecordPath(1, 1, ".run.tmp")));
}

TEST_F(ShimTest, NonZeroExitIsJournaled) {
  const int status = WaitShim(StartShim(2, {"sh", "-c", "exit 42"}, journal_dir()));
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_EQ(ExitRecordOf(2).exit_code, 42);
}

TEST_F(ShimTest, SignalDeathIsJournaledAs128PlusSignal) {
  const int status = WaitShim(StartShim(3, {"sh", "-c", "kill -SEGV $$"}, journal_dir()));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGSEGV);
  const journal::ExitRecord e = ExitRecordOf(3);
  EXPECT_EQ(e.exit_code, 128 + SIGSEGV);
  EXPECT_STREQ(e.reason, "killed by signal 11");
}

TEST_F(ShimTest, SigtermIsForwardedToTheTasksGroup) {
  const pid_t shim = StartShim(4, {"sh", "-c", "echo ready; sleep 600 & wait"}, journal_dir());
  ASSERT_TRUE(PollUntil([&] { return ReadFile(log_).find("ready") != std::string::npos; }));
  kill(shim, SIGTERM);
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);  // the shim itself was not terminated
  EXPECT_EQ(ExitRecordOf(4).exit_code, 128 + SIGTERM);
}

TEST_F(ShimTest, Sigusr1BecomesSigkillForATaskThatIgnoresSigterm) {
  const pid_t shim = StartShim(
      5, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, journal_dir());
  ASSERT_TRUE(PollUntil([&] { return ReadFile(log_).find("ready") != std::string::npos; }));
  kill(shim, SIGTERM);  // ignored by the task
  kill(shim, SIGUSR1);
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL);
  EXPECT_EQ(ExitRecordOf(5).exit_code, 128 + SIGKILL);
}

TEST_F(ShimTest, WhatIsLeftOfTheTasksGroupIsKilledWithIt) {
  const std::string pid_file = path("bg.pid");
  const pid_t shim = StartShim(
      6, {"sh", "-c", "sleep 600 & echo $! > " + pid_file + "; exit 0"}, journal_dir());
  EXPECT_EQ(WEXITSTATUS(WaitShim(shim)), 0);
  const pid_t leftover = std::stoi(ReadFile(pid_file));
  journal::ProcessId id;
  EXPECT_TRUE(PollUntil([&] { return !journal::ReadProcessId(leftover, &id); }))
      << "the background sleep survived its task";
}

TEST_F(ShimTest, MissingJournalDirFailsTheLaunchClearlyAndTheTaskNeverRuns) {
  const std::string marker = path("ran");
  const pid_t shim =
      StartShim(7, {"sh", "-c", "touch " + marker}, path("no-such-dir/journal"));
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 127);
  const std::string said = StatusPipe();
  EXPECT_NE(said.find("launch failed: journal: cannot write"), std::string::npos) << said;
  EXPECT_NE(said.find("no-such-dir/journal/7.1.run"), std::string::npos) << said;
  EXPECT_NE(ReadFile(log_).find("gpusched-shim: launch failed"), std::string::npos);
  EXPECT_FALSE(Exists(marker));
}

// The start handshake (shim_confirm.h): persist before act across an agent's kill -9. The
// chaos bench saw a task run twice: the agent was killed just after it spawned a shim, the
// next agent read the journal before that shim wrote its run record, and the server placed
// the task again while the first copy ran.
TEST_F(ShimTest, DoubleRun_WithConfirmTheTaskRunsOnlyAfterTheAgentAnswersItsRunRecord) {
  const std::string marker = path("ran");
  const pid_t shim = StartShim(20, {"sh", "-c", "touch " + marker}, journal_dir(),
                               {"--confirm=1"}, /*socket=*/true);
  char asked = 1;
  ASSERT_EQ(read(status_fd_, &asked, 1), 1);
  EXPECT_EQ(asked, kConfirmRequest);
  // Asked only once its run record is on disk, and its task held until the answer.
  EXPECT_TRUE(Exists(RecordPath(20, 1, ".run")));
  EXPECT_FALSE(Exists(marker));
  ASSERT_EQ(write(status_fd_, &kConfirmAnswer, 1), 1);
  const int status = WaitShim(shim);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Exists(marker));
  EXPECT_EQ(ExitRecordOf(20).exit_code, 0);
  EXPECT_EQ(StatusPipe(), "");
}

TEST_F(ShimTest, DoubleRun_AnAgentGoneBeforeItsAnswerLeavesNoRecordAndTheTaskNeverRuns) {
  const std::string marker = path("ran");
  const pid_t shim = StartShim(21, {"sh", "-c", "touch " + marker}, journal_dir(),
                               {"--confirm=1"}, /*socket=*/true);
  char asked = 1;
  ASSERT_EQ(read(status_fd_, &asked, 1), 1);
  ASSERT_TRUE(Exists(RecordPath(21, 1, ".run")));
  shutdown(status_fd_, SHUT_WR);  // what a dead agent's closed socket says: EOF, no answer
  const int status = WaitShim(shim);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
  EXPECT_FALSE(Exists(marker));
  // Nothing a later agent could adopt or report: the task never ran.
  EXPECT_FALSE(Exists(RecordPath(21, 1, ".run")));
  EXPECT_FALSE(Exists(RecordPath(21, 1, ".exit")));
  EXPECT_NE(StatusPipe().find("launch abandoned"), std::string::npos);
}

TEST_F(ShimTest, DoubleRun_AWrongAnswerOrConfirmValueNeverRunsTheTask) {
  const std::string marker = path("ran");
  pid_t shim = StartShim(22, {"sh", "-c", "touch " + marker}, journal_dir(), {"--confirm=1"},
                         /*socket=*/true);
  char asked = 1;
  ASSERT_EQ(read(status_fd_, &asked, 1), 1);
  ASSERT_EQ(write(status_fd_, "x", 1), 1);
  EXPECT_EQ(WEXITSTATUS(WaitShim(shim)), 127);
  EXPECT_FALSE(Exists(marker));
  EXPECT_FALSE(Exists(RecordPath(22, 1, ".run")));
  close(status_fd_);
  shim = StartShim(23, {"sh", "-c", "touch " + marker}, journal_dir(), {"--confirm=yes"}, true);
  EXPECT_EQ(WEXITSTATUS(WaitShim(shim)), 127);
  EXPECT_NE(StatusPipe().find("--confirm: must be 1"), std::string::npos);
  EXPECT_FALSE(Exists(marker));
}

// The agent's half (AnswerConfirmRequest), against a socket the test holds as the shim would.
class AnswerConfirmRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    ASSERT_EQ(fcntl(fds_[0], F_SETFL, O_NONBLOCK), 0);  // the agent's end, as Spawn makes it
  }
  void TearDown() override {
    close(fds_[0]);
    if (fds_[1] >= 0) close(fds_[1]);
  }
  int fds_[2] = {-1, -1};  // [0] the agent's, [1] the shim's
};

TEST_F(AnswerConfirmRequestTest, DoubleRun_NothingAskedYetIsNotYetAndSendsNothing) {
  EXPECT_EQ(AnswerConfirmRequest(fds_[0]), ConfirmOutcome::kNotYet);
  char c = 0;
  EXPECT_EQ(recv(fds_[1], &c, 1, MSG_DONTWAIT), -1);  // no answer was sent
}

TEST_F(AnswerConfirmRequestTest, DoubleRun_ARequestIsAnsweredOnce) {
  ASSERT_EQ(write(fds_[1], &kConfirmRequest, 1), 1);
  EXPECT_EQ(AnswerConfirmRequest(fds_[0]), ConfirmOutcome::kAnswered);
  char answer = 0;
  ASSERT_EQ(read(fds_[1], &answer, 1), 1);
  EXPECT_EQ(answer, kConfirmAnswer);
  EXPECT_EQ(AnswerConfirmRequest(fds_[0]), ConfirmOutcome::kNotYet);  // consumed
}

TEST_F(AnswerConfirmRequestTest, DoubleRun_AFailureLineIsLeftForTheExitsReaderAndNotAnswered) {
  const std::string line = "launch failed: journal: cannot write";
  ASSERT_EQ(write(fds_[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
  EXPECT_EQ(AnswerConfirmRequest(fds_[0]), ConfirmOutcome::kNoRequest);
  char buf[64] = {};
  EXPECT_EQ(read(fds_[0], buf, sizeof buf), static_cast<ssize_t>(line.size()));
  EXPECT_EQ(std::string(buf), line);
  char c = 0;
  EXPECT_EQ(recv(fds_[1], &c, 1, MSG_DONTWAIT), -1);  // and no answer
}

TEST_F(AnswerConfirmRequestTest, DoubleRun_AShimGoneWithoutAskingWillNotAsk) {
  close(std::exchange(fds_[1], -1));
  EXPECT_EQ(AnswerConfirmRequest(fds_[0]), ConfirmOutcome::kNoRequest);
}

TEST_F(ShimTest, UnwritableExitIsReportedWithTheTasksCode) {
  const std::string gate = path("gate");
  const pid_t shim = StartShim(
      8, {"sh", "-c", "echo ready; while [ ! -e " + gate + " ]; do sleep 0.02; done; exit 9"},
      journal_dir());
  ASSERT_TRUE(PollUntil([&] { return ReadFile(log_).find("ready") != std::string::npos; }));
  std::filesystem::remove_all(journal_dir());
  OpenGate("gate");
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 9);
  const std::string said = StatusPipe();
  EXPECT_NE(said.find("the exit could not be journaled (journal: cannot write"),
            std::string::npos)
      << said;
}

TEST_F(ShimTest, BadArgumentsAreAUsageError) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execl(GPUSCHED_SHIM, GPUSCHED_SHIM, "dir", "not-a-number", "1", "/bin/true", "true",
          nullptr);
    _exit(126);
  }
  EXPECT_EQ(WEXITSTATUS(WaitShim(pid)), 2);
}

}  // namespace
}  // namespace gpusched::agent

namespace gpusched::agent {
namespace {

TEST(RankDevicesTest, SplitsTheNodesGpusIntoEqualSlicesInOrder) {
  char out[64];
  ASSERT_TRUE(RankDevices("0,1,2,3", 0, 2, out, sizeof out));
  EXPECT_STREQ(out, "0,1");
  ASSERT_TRUE(RankDevices("0,1,2,3", 1, 2, out, sizeof out));
  EXPECT_STREQ(out, "2,3");
  ASSERT_TRUE(RankDevices("4,5,6,7", 3, 4, out, sizeof out));
  EXPECT_STREQ(out, "7");
  ASSERT_TRUE(RankDevices("10,11", 0, 1, out, sizeof out));
  EXPECT_STREQ(out, "10,11");
  EXPECT_FALSE(RankDevices("0,1,2", 0, 2, out, sizeof out));  // uneven
  EXPECT_FALSE(RankDevices("0,1", 2, 2, out, sizeof out));    // no such copy
  EXPECT_FALSE(RankDevices("10,11,12,13", 0, 1, out, 6));     // does not fit
}

// Scoped environment for the shim the test starts (it inherits the test's).
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// --tasks-per-node 2 on node rank 1 of 2: two processes, each with its rank and its half of
// the node's GPUs.
TEST_F(ShimTest, Issue13_TasksPerNodeStartsOneProcessPerSliceWithItsRank) {
  ScopedEnv env({{kTasksPerNodeEnv, "7"},  // the option decides, not the environment
                 {"NODE_RANK", "1"},
                 {"NNODES", "2"},
                 {"CUDA_VISIBLE_DEVICES", "4,5,6,7"}});
  const pid_t shim = StartShim(
      20,
      {"sh", "-c",
       "echo \"local=$LOCAL_RANK rank=$RANK world=$WORLD_SIZE lws=$LOCAL_WORLD_SIZE "
       "gpus=$CUDA_VISIBLE_DEVICES k=${GPUSCHED_TASKS_PER_NODE:-unset}\""},
      journal_dir(), {"--tasks-per-node=2"});
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string log = ReadFile(log_);
  EXPECT_NE(log.find("local=0 rank=2 world=4 lws=2 gpus=4,5 k=unset"), std::string::npos) << log;
  EXPECT_NE(log.find("local=1 rank=3 world=4 lws=2 gpus=6,7 k=unset"), std::string::npos) << log;
  EXPECT_EQ(ExitRecordOf(20).exit_code, 0);
}

// One process fails: the other gets SIGTERM (its handler writes a file) and the task ends
// with the failed one's code.
TEST_F(ShimTest, Issue13_OneFailedProcessOfANodeStopsTheOthers) {
  ScopedEnv env({{std::string("CUDA_VISIBLE_DEVICES"), std::string("0,1")}});
  const std::string marker = path("term-seen");
  const pid_t shim = StartShim(
      21,
      {"sh", "-c",
       "if [ \"$LOCAL_RANK\" = 1 ]; then sleep 0.2; exit 5; fi; "
       "trap \"echo term > '" + marker + "'; exit 143\" TERM; while :; do sleep 0.05; done"},
      journal_dir(), {"--tasks-per-node=2"});
  const int status = WaitShim(shim);
  EXPECT_EQ(WEXITSTATUS(status), 5);
  EXPECT_EQ(ExitRecordOf(21).exit_code, 5);
  EXPECT_EQ(ReadFile(marker), "term\n");
}

// The shim takes what it applies from the agent's options only: an option it does not know
// is refused (exit 2, named) rather than skipped, and one that does not parse fails the task.
TEST_F(ShimTest, Issue35_UnknownOrBadOptionsAreRefused) {
  const pid_t unknown = StartShim(30, {"true"}, journal_dir(), {"--cred=0:0:"});
  EXPECT_EQ(WEXITSTATUS(WaitShim(unknown)), 2);
  EXPECT_NE(ReadFile(log_).find("unknown option --cred=0:0:"), std::string::npos) << ReadFile(log_);
  close(status_fd_);
  const pid_t bad = StartShim(31, {"true"}, journal_dir(), {"--creds=root"});
  EXPECT_EQ(WEXITSTATUS(WaitShim(bad)), 127);
  EXPECT_NE(StatusPipe().find("--creds"), std::string::npos);
  const pid_t copies = StartShim(32, {"true"}, journal_dir(), {"--tasks-per-node=65"});
  EXPECT_EQ(WEXITSTATUS(WaitShim(copies)), 127);
  EXPECT_NE(StatusPipe().find("--tasks-per-node=65: must be 1 to 64"), std::string::npos);
}

// A task that cannot start (here: no such workdir) says why in its log and in its journaled
// exit, which is permanent; the shim reports nothing on its status pipe (the exit says it).
TEST_F(ShimTest, Issue35_AStartFailureIsJournaledAsPermanent) {
  const pid_t shim = StartShim(33, {"true"}, journal_dir(), {"--workdir=" + path("nowhere")});
  EXPECT_EQ(WEXITSTATUS(WaitShim(shim)), 127);
  const journal::ExitRecord r = ExitRecordOf(33);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_TRUE(r.permanent);
  EXPECT_EQ(std::string(r.reason),
            "launch failed: workdir: " + path("nowhere") + ": No such file or directory");
  EXPECT_NE(ReadFile(log_).find("workdir: " + path("nowhere")), std::string::npos);
  EXPECT_EQ(StatusPipe(), "");
}

}  // namespace
}  // namespace gpusched::agent
