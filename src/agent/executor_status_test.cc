// The executor's status of a task (CN109992422A claim 7): a stopped process group, a stale
// heartbeat file and a fresh one, observed on real processes.
#include "agent/executor_status.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

// A child leading its own process group, running `sh -c script` with `env` added.
class Child {
 public:
  Child(const std::string& script, const std::vector<std::string>& env = {}) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
      execlp("sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid_, pid_);  // either side may win the race; both ask for the same
  }
  ~Child() {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  // Waits until the leader is stopped (the shell stopped itself, or was stopped).
  bool WaitStopped() const {
    int status = 0;
    return waitpid(pid_, &status, WUNTRACED) == pid_ && WIFSTOPPED(status);
  }

 private:
  pid_t pid_ = 0;
};

// Unix ms of a file's mtime.
TimeMs MtimeMs(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return static_cast<TimeMs>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

class CN109992422A : public ExecutorTest {};

TEST_F(CN109992422A, Claim7_SelfStoppedTaskReportsStopped) {
  Child task("kill -STOP $$; sleep 30");
  ASSERT_TRUE(task.WaitStopped());
  EXPECT_EQ(StoppedGroups({task.pid()}), std::set<pid_t>{task.pid()});
  ExecutorObserver observer;
  const TaskKey key{1, 1};
  const std::map<TaskKey, TaskProcess> tasks{{key, {task.pid(), 0}}};
  TaskObservation seen = observer.Observe(tasks, 0)[key];
  EXPECT_EQ(seen.health, TaskHealth::kStopped);
  EXPECT_NE(seen.detail.find("state T"), std::string::npos) << seen.detail;
  // Continued, it is running again.
  kill(task.pid(), SIGCONT);
  ASSERT_TRUE(PollUntil([&] { return StoppedGroups({task.pid()}).empty(); }));
  EXPECT_EQ(observer.Observe(tasks, 0)[key].health, TaskHealth::kRunning);
}

TEST_F(CN109992422A, Claim7_GroupWithAMemberAtWorkIsNotStopped) {
  // The leader stops itself while its child keeps running: the task is still at work.
  Child task("sleep 30 & kill -STOP $$; wait");
  ASSERT_TRUE(task.WaitStopped());
  EXPECT_TRUE(StoppedGroups({task.pid()}).empty());
  // Once the child is stopped too, the whole task is.
  kill(-task.pid(), SIGSTOP);
  EXPECT_TRUE(PollUntil([&] { return StoppedGroups({task.pid()}).size() == 1; }));
}

TEST_F(CN109992422A, Claim7_StaleHeartbeatFileIsHungAndAFreshOneRunning) {
  const std::string file = path("hb");
  std::ofstream(file) << "";
  const TimeMs touched = MtimeMs(file);
  const HeartbeatFile hb{file, 2000};
  EXPECT_FALSE(StaleHeartbeat(hb, touched - 500, touched + 2000));  // exactly at the limit
  ASSERT_TRUE(StaleHeartbeat(hb, touched - 500, touched + 2001));
  auto stale = StaleHeartbeat(hb, touched - 500, touched + 3000);
  ASSERT_TRUE(stale);
  EXPECT_EQ(*stale, "heartbeat file not touched for 3s (heartbeat_timeout 2s)");
  // No file yet: counted from the task's start.
  const HeartbeatFile missing{path("never"), 2000};
  EXPECT_FALSE(StaleHeartbeat(missing, 10'000, 12'000));
  ASSERT_TRUE(StaleHeartbeat(missing, 10'000, 12'001));
  EXPECT_NE(StaleHeartbeat(missing, 10'000, 12'001)->find("since the start"), std::string::npos);
}

TEST_F(CN109992422A, Claim7_HeartbeatFileFromTheTaskEnvironment) {
  const std::string file = path("task.heartbeat");
  // The task touches its file once, then stops touching it (but keeps running).
  Child task("touch \"$GPUSCHED_HEARTBEAT_FILE\"; sleep 30",
             {"GPUSCHED_HEARTBEAT_FILE=" + file, "GPUSCHED_HEARTBEAT_TIMEOUT_MS=1000"});
  ASSERT_TRUE(PollUntil([&] { return Exists(file); }));
  auto f = HeartbeatFileOf(task.pid());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->path, file);
  EXPECT_EQ(f->timeout_ms, 1000);
  const TimeMs touched = MtimeMs(file);
  ExecutorObserver observer;
  const TaskKey key{7, 2};
  const std::map<TaskKey, TaskProcess> tasks{{key, {task.pid(), touched - 100}}};
  EXPECT_EQ(observer.Observe(tasks, touched + 900)[key].health, TaskHealth::kRunning);
  TaskObservation seen = observer.Observe(tasks, touched + 3000)[key];
  EXPECT_EQ(seen.health, TaskHealth::kHeartbeatStale);
  EXPECT_NE(seen.detail.find("not touched for 3s"), std::string::npos) << seen.detail;
  // A task given no heartbeat file is never stale.
  Child plain("sleep 30");
  ASSERT_TRUE(PollUntil([&] { return Exists("/proc/" + std::to_string(plain.pid())); }));
  EXPECT_FALSE(HeartbeatFileOf(plain.pid()));
  const TaskKey plain_key{8, 1};
  const std::map<TaskKey, TaskProcess> plain_tasks{{plain_key, {plain.pid(), 0}}};
  EXPECT_EQ(observer.Observe(plain_tasks, touched + 60'000)[plain_key].health,
            TaskHealth::kRunning);
}

// The process executor gives the task's group and start to the observer: a task under its
// shim that stops itself is seen stopped.
TEST_F(CN109992422A, Claim7_ProcessRunnerTaskThatStopsItselfIsSeenStopped) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_TRUE(runner);
  LaunchSpec s = Spec(3, {"sh", "-c", "echo ready; kill -STOP $$; echo resumed"});
  ASSERT_TRUE(LaunchReady(*runner, s));
  ExecutorObserver observer;
  const TaskKey key{3, 1};
  TaskObservation seen;
  ASSERT_TRUE(PollUntil([&] {
    seen = observer.Observe(runner->Processes(), clock_.NowMs())[key];
    return seen.health == TaskHealth::kStopped;
  }));
  const TaskProcess p = runner->Processes().at(key);
  EXPECT_GT(p.pgid, 0);
  EXPECT_GT(p.started_ms, 0);
  // Killing it (SIGTERM, which the shim follows with SIGCONT) ends it within the grace.
  runner->Kill(3, 1, 60'000, "hung");
  auto e = rec.WaitFor(3, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->reason, "killed: hung");
  EXPECT_EQ(e->exit_code, 128 + SIGTERM);
  EXPECT_TRUE(runner->Processes().empty());
}

}  // namespace
TEST(ExecutorStatusParse, ProcStatTakesTheFieldsAfterTheLastParenthesis) {
  auto s = ParseProcStat("4242 (a) b) T 1 4240 4240 0 -1");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, 'T');
  EXPECT_EQ(s->pgrp, 4240);
  s = ParseProcStat("7 (sh) S 1 7 7");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->pgrp, 7);
  EXPECT_FALSE(ParseProcStat(""));
  EXPECT_FALSE(ParseProcStat("7 sh S 1 7"));         // no comm in parentheses
  EXPECT_FALSE(ParseProcStat("7 (sh) S 1"));          // no group
  EXPECT_FALSE(ParseProcStat("7 (sh) S 1 x"));        // group not a number
  EXPECT_FALSE(ParseProcStat("7 (sh) S 1 0"));        // no group 0
  EXPECT_FALSE(ParseProcStat("7 (sh) S 1 99999999999"));  // past pid_t
}

TEST(ExecutorStatusParse, HeartbeatEnvironNeedsAFileAndAWholePositiveTimeout) {
  using namespace std::string_literals;
  auto f = ParseHeartbeatEnviron("A=1\0GPUSCHED_HEARTBEAT_FILE=/w/hb\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=5000\0"s);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->path, "/w/hb");
  EXPECT_EQ(f->timeout_ms, 5000);
  // No trailing NUL, and a value holding '=' is kept whole.
  f = ParseHeartbeatEnviron("GPUSCHED_HEARTBEAT_TIMEOUT_MS=7\0GPUSCHED_HEARTBEAT_FILE=/a=b"s);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->path, "/a=b");
  EXPECT_EQ(f->timeout_ms, 7);
  for (const std::string& bad :
       {""s, "GPUSCHED_HEARTBEAT_FILE=/w/hb"s, "GPUSCHED_HEARTBEAT_TIMEOUT_MS=5000"s,
        "GPUSCHED_HEARTBEAT_FILE=\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=5000"s,
        "GPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=0"s,
        "GPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=-5"s,
        "GPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=5s"s,
        "GPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS="s,
        "GPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=99999999999999999999"s,
        "XGPUSCHED_HEARTBEAT_FILE=/w\0GPUSCHED_HEARTBEAT_TIMEOUT_MS=5"s}) {
    EXPECT_FALSE(ParseHeartbeatEnviron(bad)) << bad;
  }
}

// A process that ends between the open of its /proc file and the read: the read fails with
// ESRCH, and the reader says "cannot be read" instead of throwing (an ASan CI run saw agents
// end on an exception from such a read).
TEST(ProcFileTest, ProcessThatEndsBetweenOpenAndReadIsUnreadableNotAnException) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const std::string dir = "/proc/" + std::to_string(child);
  const int stat_fd = open((dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  const int environ_fd = open((dir + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(stat_fd, 0);
  ASSERT_GE(environ_fd, 0);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ReadProcFd(stat_fd), std::nullopt);
  const std::optional<std::string> environ_text = ReadProcFd(environ_fd);
  EXPECT_TRUE(!environ_text || environ_text->empty());  // gone: nothing of it is read
  close(stat_fd);
  close(environ_fd);
  EXPECT_EQ(ReadProcFile(dir + "/stat"), std::nullopt);  // and now it cannot be opened
  EXPECT_FALSE(HeartbeatFileOf(child).has_value());
  const std::optional<std::string> self = ReadProcFile("/proc/self/stat");
  ASSERT_TRUE(self.has_value());
  EXPECT_TRUE(ParseProcStat(*self).has_value()) << *self;
  EXPECT_EQ(ReadProcFile("/proc/self/stat", 5)->size(), 5u);  // max_bytes
}

}  // namespace gpusched::agent
