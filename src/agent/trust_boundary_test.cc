// Issue 35, the agent/shim trust boundary, attacked where it lies: a LaunchSpec whose task
// environment carries hostile values, run by the real ProcessRunner and gpusched-shim. The
// server refuses reserved names at submission; these tests hold whatever the server lets
// through. Most need root (skipped otherwise): they create a system user and remove it.

#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/process_runner.h"
#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

// The variables of the files a task is told to write, and the suffix the agent uses for each.
const std::map<std::string, std::string> kTaskFiles = {
    {"GPUSCHED_PRELOAD_STATE", ".gpumem"},
    {"GPUSCHED_PEAK_MIB_FILE", ".peak"},
    {"GPUSCHED_SIM_GPU_UTIL_FILE", ".gpuutil"},
    {"GPUSCHED_HEARTBEAT_FILE", ".heartbeat"}};

class AgentTrustTest : public ExecutorTest {
 protected:
  void SetUp() override {
    ExecutorTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "needs root (creates a user, runs a task as it)";
    name_ = "gpsb" + std::to_string(getpid() % 100000);
    const std::string add = "useradd --system --no-create-home --shell /bin/sh " + name_ +
                            " >/dev/null 2>&1";
    if (std::system(add.c_str()) != 0) GTEST_SKIP() << "useradd failed";
    const passwd* pw = getpwnam(name_.c_str());
    ASSERT_NE(pw, nullptr);
    user_.name = name_;
    user_.uid = pw->pw_uid;
    user_.gid = pw->pw_gid;
    user_.groups = {pw->pw_gid};
    user_.home = "/";
    // The scratch folder must be reachable by the user, as an agent's log folder is.
    std::filesystem::permissions(path(""), std::filesystem::perms(0755));
  }
  void TearDown() override {
    if (!name_.empty()) (void)!std::system(("userdel " + name_ + " >/dev/null 2>&1").c_str());
    ExecutorTest::TearDown();
  }
  LaunchSpec UserSpec(uint64_t id, std::vector<std::string> cmd) const {
    LaunchSpec s = Spec(id, std::move(cmd));
    s.user = user_;
    return s;
  }
  // A root-owned file holding "secret", readable by root only.
  std::string RootSecret(const std::string& name) const {
    const std::string p = path(name);
    std::ofstream(p) << "secret";
    chmod(p.c_str(), 0600);
    return p;
  }

  std::string name_;
  TaskUser user_;
};

// Finding 1: the task's environment named its own credentials (uid 0) and the shim took them.
TEST_F(AgentTrustTest, Issue35_TaskCannotSetItsOwnCredentials) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = UserSpec(1, {"sh", "-c", "id -u; id -g; echo creds=${GPUSCHED_TASK_CREDS-unset}"});
  s.env["GPUSCHED_TASK_CREDS"] = "0:0:";
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 0) << e->reason;
  EXPECT_EQ(ReadFile(s.log_path), std::to_string(user_.uid) + "\n" + std::to_string(user_.gid) +
                                      "\ncreds=unset\n");
}

// Finding 2: root-owned files named by the task's environment were created, or taken over,
// and given to the task's user. They stay root's; the task writes the agent's files instead.
TEST_F(AgentTrustTest, Issue35_FilesNamedByTheTaskStayRoots) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = UserSpec(2, {"sh", "-c",
                              "for v in \"$GPUSCHED_PRELOAD_STATE\" \"$GPUSCHED_PEAK_MIB_FILE\" "
                              "\"$GPUSCHED_SIM_GPU_UTIL_FILE\" \"$GPUSCHED_HEARTBEAT_FILE\"; "
                              "do echo 7 > \"$v\" && echo \"$v\"; done"});
  std::map<std::string, std::string> secrets;
  for (const auto& [var, suffix] : kTaskFiles) {
    secrets[var] = RootSecret("secret" + suffix);
    s.env[var] = secrets[var];
  }
  // A link planted where the agent makes a file is replaced, its target untouched.
  const std::string planted = RootSecret("planted");
  std::filesystem::create_symlink(planted, s.log_path + ".peak");
  s.task_files = kTaskFiles;
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(2, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 0) << ReadFile(s.log_path);
  secrets["planted"] = planted;
  for (const auto& [var, file] : secrets) {
    struct stat st {};
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_uid, 0u) << var << " " << file;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << var << " " << file;
    EXPECT_EQ(ReadFile(file), "secret") << var << " " << file;
  }
  std::string told;  // in the script's order
  for (const char* suffix : {".gpumem", ".peak", ".gpuutil", ".heartbeat"}) {
    told += s.log_path + suffix + "\n";
  }
  for (const auto& [var, suffix] : kTaskFiles) {
    struct stat st {};
    ASSERT_EQ(lstat((s.log_path + suffix).c_str(), &st), 0) << suffix;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << suffix;
    EXPECT_EQ(st.st_uid, user_.uid) << suffix;
    EXPECT_EQ(ReadFile(s.log_path + suffix), "7\n") << suffix;
  }
  EXPECT_EQ(ReadFile(s.log_path), told);
}

// Finding 6: the workdir was checked, and entered, as root. A directory only root may enter
// now fails the task with its user's own error, permanently, and nothing runs.
TEST_F(AgentTrustTest, Issue35_PrivateWorkdirFailsWithTheUsersOwnError) {
  std::filesystem::create_directories(path("private"));
  chmod(path("private").c_str(), 0700);
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = UserSpec(3, {"sh", "-c", "echo ran in $(pwd)"});
  s.workdir = path("private");
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(3, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(e->reason, "launch failed: workdir: " + path("private") + ": Permission denied");
  EXPECT_TRUE(e->permanent);
  const std::string log = ReadFile(s.log_path);
  EXPECT_EQ(log.find("ran in"), std::string::npos) << log;
  EXPECT_NE(log.find("workdir: " + path("private") + ": Permission denied"), std::string::npos)
      << log;
}

// Finding 6: the command was looked up as root, which told the user what a private directory
// holds. As the user, a program there and one that is not get the same answer, and neither
// runs; a name found only on such a directory of the task's PATH is not found.
TEST_F(AgentTrustTest, Issue35_CommandInARootOnlyDirectoryIsNotFoundNorRun) {
  std::filesystem::create_directories(path("secret"));
  const std::string ran = path("ran");
  std::ofstream(path("secret/prog")) << "#!/bin/sh\ntouch " << ran << "\n";
  chmod(path("secret/prog").c_str(), 0755);
  chmod(path("secret").c_str(), 0700);
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  ASSERT_TRUE(runner->Launch(UserSpec(4, {path("secret/prog")})).ok());
  ASSERT_TRUE(runner->Launch(UserSpec(5, {path("secret/none")})).ok());
  LaunchSpec by_name = UserSpec(6, {"prog"});
  by_name.env["PATH"] = path("secret") + ":/usr/bin:/bin";
  ASSERT_TRUE(runner->Launch(by_name).ok());
  auto present = rec.WaitFor(4, 1), absent = rec.WaitFor(5, 1), named = rec.WaitFor(6, 1);
  ASSERT_TRUE(present && absent && named);
  EXPECT_EQ(present->reason, "launch failed: command: " + path("secret/prog") +
                                 ": Permission denied");
  EXPECT_EQ(absent->reason, "launch failed: command: " + path("secret/none") +
                                ": Permission denied");
  EXPECT_EQ(named->reason, "launch failed: command: prog: not found on PATH");
  for (const auto& e : {*present, *absent, *named}) {
    EXPECT_EQ(e.exit_code, 127) << e.id;
    EXPECT_TRUE(e.permanent) << e.id;
  }
  EXPECT_FALSE(Exists(ran));
}

// The task runs as root only when the agent chose uid 0 (allow_root_tasks): the drop to
// 0:0 is checked like any other, and a task's own variables change nothing.
TEST_F(AgentTrustTest, Issue35_RootOnlyWhenTheAgentChoseIt) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Spec(7, {"sh", "-c", "id -u"});
  s.user = TaskUser{"root", 0, 0, {0}, "/root"};
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(7, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 0) << ReadFile(s.log_path);
  EXPECT_EQ(ReadFile(s.log_path), "0\n");
}

// The reserved-name rule at the executor: the agent's own GPUSCHED_* (its token, its server)
// never reach a task, a task's own are dropped, and the values the agent sets win. No root
// needed.
class AgentEnvTest : public ExecutorTest {};

TEST_F(AgentEnvTest, Issue35_AgentsOwnVariablesDoNotReachTheTask) {
  setenv("GPUSCHED_TOKEN", "the-agents-token", 1);
  setenv("GPUSCHED_SERVER", "10.0.0.1:7070", 1);
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  unsetenv("GPUSCHED_TOKEN");
  unsetenv("GPUSCHED_SERVER");
  LaunchSpec s = Spec(8, {"sh", "-c",
                          "echo token=${GPUSCHED_TOKEN-unset} server=${GPUSCHED_SERVER-unset} "
                          "id=$GPUSCHED_TASK_ID mine=${GPUSCHED_MINE-unset} plain=$PLAIN"});
  s.env["GPUSCHED_TASK_ID"] = "666";
  s.env["GPUSCHED_MINE"] = "x";
  s.env["PLAIN"] = "kept";
  s.agent_env["GPUSCHED_TASK_ID"] = "8";
  ASSERT_TRUE(runner->Launch(s).ok());
  ASSERT_TRUE(rec.WaitFor(8, 1));
  EXPECT_EQ(ReadFile(s.log_path), "token=unset server=unset id=8 mine=unset plain=kept\n");
}

}  // namespace
}  // namespace gpusched::agent
