// Issue 11, run as the user: an agent running as root starts each task as the Unix account its
// spec names (uid, gid, supplementary groups, HOME/USER/LOGNAME), keeps its log that user's
// only (0600), refuses uid 0 unless the server allows it, and fails a task whose user does not
// exist on the node, permanently, saying so. Needs root (skipped otherwise): creates a system
// user for the test and removes it afterwards.

#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "harness.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace v1 = ::gpusched::v1;
constexpr auto kRunAsUserDeadline = 90s;

class RunAsUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (creates a user, runs an agent as root)";
    user_ = "gpst" + std::to_string(getpid() % 100000);
    const std::string add = "useradd --system --no-create-home --shell /bin/sh " + user_ +
                            " >/dev/null 2>&1";
    if (std::system(add.c_str()) != 0) GTEST_SKIP() << "useradd failed";
    passwd* pw = getpwnam(user_.c_str());
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched_runas_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    agent_.Kill(SIGTERM);
    server_.Kill(SIGTERM);
    if (HasFailure()) {
      std::cerr << "server log:\n" << ReadFile(path("server.log")) << "\nagent log:\n"
                << ReadFile(path("agent.log")) << "\n";
    }
    if (!user_.empty()) (void)!std::system(("userdel " + user_ + " >/dev/null 2>&1").c_str());
    std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }

  void Start(const std::string& extra_config) {
    WriteFile(path("server.yaml"), "node_heartbeat: 200ms\ntask_heartbeat: 300ms\n" + extra_config);
    port_ = FreePort();
    // With tokens: only an authenticated user changes the account a task runs as.
    server_ = Proc({"server", "--listen", server(), "--http", "", "--data-dir", path("data"),
                    "--config", path("server.yaml"), "--auth", "token"},
                   path("server.log"));
    ASSERT_TRUE(PollUntil(
        [&] {
          admin_ = ReadFile(path("data/admin-token"));
          while (!admin_.empty() && (admin_.back() == '\n' || admin_.back() == ' ')) admin_.pop_back();
          return !admin_.empty() && Admin({"nodes", "--server", server()}).code == 0;
        },
        kRunAsUserDeadline));
    // With tokens, an agent without TLS needs an agent token of its node (issue 35).
    CliResult agent_token = Admin({"token", "create", "--server", server(), "--agent", "n1"});
    ASSERT_EQ(agent_token.code, 0) << agent_token.err;
    WriteFile(path("n1.token"), agent_token.out);
    agent_ = Proc({"agent", "--server", server(), "--name", "n1", "--gpus", "1x16GiB",
                   "--simulate", "--data-dir", path("n1"), "--token-file", path("n1.token")},
                  path("agent.log"));
    ASSERT_TRUE(PollUntil(
        [&] {
          CliResult r = Admin({"nodes", "--server", server(), "--json"});
          return r.code == 0 && r.out.find("\"connected\":true") != std::string::npos;
        },
        kRunAsUserDeadline));
  }
  CliResult Admin(const std::vector<std::string>& args) {
    return Cli(args, {{"GPUSCHED_TOKEN", admin_}});
  }
  // Submits through gRPC with a token of `user` (made by the admin): the task's user is the
  // token's. With `refused`, a refusal returns 0 and its message there.
  uint64_t Submit(const std::string& user, const std::string& script,
                  const std::map<std::string, std::string>& env = {},
                  const std::string& workdir = "", std::string* refused = nullptr) {
    CliResult made = Admin({"token", "create", "--server", server(), "--user", user});
    EXPECT_EQ(made.code, 0) << made.err;
    std::string token = made.out;
    while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
    auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::SubmitRequest req;
    req.mutable_spec()->add_command("sh");
    req.mutable_spec()->add_command("-c");
    req.mutable_spec()->add_command(script);
    req.mutable_spec()->set_max_retries(2);
    for (const auto& [k, v] : env) (*req.mutable_spec()->mutable_env())[k] = v;
    req.mutable_spec()->set_workdir(workdir);
    v1::SubmitResponse resp;
    const grpc::Status s = stub->Submit(&ctx, req, &resp);
    if (refused != nullptr && !s.ok()) {
      *refused = s.error_message();
      return 0;
    }
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.id();
  }
  Json Task(uint64_t id) {
    CliResult r = Admin({"show", std::to_string(id), "--server", server(), "--json"});
    return r.code == 0 ? Json::parse(r.out) : Json::object();
  }
  bool WaitFinished(uint64_t id) {
    return PollUntil(
        [&] {
          const std::string s = Task(id).value("state", "");
          return s == "succeeded" || s == "failed";
        },
        kRunAsUserDeadline);
  }
  std::string LogFile(uint64_t id) const {
    return path("n1/logs/task-" + std::to_string(id) + "-1.log");
  }

  std::filesystem::path dir_;
  std::string user_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int port_ = 0;
  std::string admin_;  // DATA_DIR/admin-token of the server
  Proc server_, agent_;
};

TEST_F(RunAsUserTest, TaskRunsAsItsUserWithAPrivateLog) {
  Start("");
  const uint64_t id = Submit(user_, "id -u; id -g; echo \"$USER $LOGNAME $HOME\"");
  ASSERT_TRUE(WaitFinished(id));
  ASSERT_EQ(Task(id)["state"], "succeeded") << Task(id).dump();
  const std::string log = ReadFile(LogFile(id));
  EXPECT_NE(log.find(std::to_string(uid_) + "\n" + std::to_string(gid_) + "\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(user_ + " " + user_ + " "), std::string::npos) << log;
  struct stat st{};
  ASSERT_EQ(stat(LogFile(id).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid_);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(RunAsUserTest, RootAndUnknownUsersFailPermanently) {
  Start("");
  const uint64_t root = Submit("root", "id -u");
  ASSERT_TRUE(WaitFinished(root));
  Json t = Task(root);
  EXPECT_EQ(t["state"], "failed") << t.dump();
  EXPECT_EQ(t["attempts"], 1) << t.dump();  // permanent: no retry
  EXPECT_NE(t.value("reason", "").find("user 'root' is uid 0 on node n1"), std::string::npos)
      << t.dump();
  EXPECT_NE(t.value("reason", "").find("allow_root_tasks"), std::string::npos) << t.dump();

  const uint64_t ghost = Submit("nosuchuser-gpst", "id -u");
  ASSERT_TRUE(WaitFinished(ghost));
  t = Task(ghost);
  EXPECT_EQ(t["state"], "failed") << t.dump();
  EXPECT_EQ(t["attempts"], 1) << t.dump();
  EXPECT_NE(t.value("reason", "").find("user 'nosuchuser-gpst' does not exist on node n1"),
            std::string::npos)
      << t.dump();
}

TEST_F(RunAsUserTest, RootAllowedWhenTheServerSaysSo) {
  Start("allow_root_tasks: true\n");
  const uint64_t id = Submit("root", "id -u");
  ASSERT_TRUE(WaitFinished(id));
  EXPECT_EQ(Task(id)["state"], "succeeded") << Task(id).dump();
  EXPECT_EQ(ReadFile(LogFile(id)), "0\n");
}

// Issue 35, finding 1: `GPUSCHED_TASK_CREDS=0:0:` in a task's environment ran it as root.
// The server may refuse the name at submission (saying which); what it lets through, the
// agent ignores: the task runs as its user.
TEST_F(RunAsUserTest, Issue35_TaskEnvironmentCannotMakeItRoot) {
  Start("");
  std::string refused;
  const uint64_t id = Submit(user_, "id -u", {{"GPUSCHED_TASK_CREDS", "0:0:"}}, "", &refused);
  if (id == 0) {
    EXPECT_NE(refused.find("GPUSCHED_TASK_CREDS"), std::string::npos) << refused;
    return;
  }
  ASSERT_TRUE(WaitFinished(id));
  EXPECT_EQ(Task(id)["state"], "succeeded") << Task(id).dump();
  EXPECT_EQ(ReadFile(LogFile(id)), std::to_string(uid_) + "\n");
}

// Issue 35, finding 2: a root-owned file named by the task's GPUSCHED_HEARTBEAT_FILE or
// GPUSCHED_PRELOAD_STATE became the submitter's. It stays root's, with its content.
TEST_F(RunAsUserTest, Issue35_RootFileNamedByTheTaskStaysRoots) {
  Start("");
  const std::string secret = path("secret");
  WriteFile(secret, "secret");
  chmod(secret.c_str(), 0600);
  std::string refused;
  const uint64_t id = Submit(
      user_, "echo pwned > \"$GPUSCHED_HEARTBEAT_FILE\"; echo pwned > \"$GPUSCHED_PRELOAD_STATE\"; true",
      {{"GPUSCHED_HEARTBEAT_FILE", secret}, {"GPUSCHED_PRELOAD_STATE", secret}}, "", &refused);
  if (id != 0) ASSERT_TRUE(WaitFinished(id));
  struct stat st{};
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(secret), "secret");
}

// Issue 35, finding 6: the workdir was entered as root, so a task started in a directory its
// user cannot enter. Now it fails with that user's own error, permanently.
TEST_F(RunAsUserTest, Issue35_PrivateWorkdirFailsWithTheUsersOwnError) {
  Start("");
  const std::string private_dir = path("private");
  std::filesystem::create_directories(private_dir);
  chmod(private_dir.c_str(), 0700);
  const uint64_t id = Submit(user_, "echo ran", {}, private_dir);
  ASSERT_TRUE(WaitFinished(id));
  const Json t = Task(id);
  EXPECT_EQ(t["state"], "failed") << t.dump();
  EXPECT_EQ(t["attempts"], 1) << t.dump();  // permanent: no retry
  EXPECT_NE(t.value("reason", "").find("workdir: " + private_dir + ": Permission denied"),
            std::string::npos)
      << t.dump();
  EXPECT_EQ(ReadFile(LogFile(id)).find("ran"), std::string::npos);
}

// Issue 35: the agent's own GPUSCHED_* variables (a token, a server address) reached every
// task it started.
TEST_F(RunAsUserTest, Issue35_AgentsOwnVariablesDoNotReachTheTask) {
  setenv("GPUSCHED_E2E_AGENT_SECRET", "agent-only", 1);  // inherited by the agent
  Start("");
  unsetenv("GPUSCHED_E2E_AGENT_SECRET");
  const uint64_t id = Submit(user_, "echo secret=${GPUSCHED_E2E_AGENT_SECRET-unset} id=$GPUSCHED_TASK_ID");
  ASSERT_TRUE(WaitFinished(id));
  EXPECT_EQ(ReadFile(LogFile(id)), "secret=unset id=" + std::to_string(id) + "\n");
}

}  // namespace
}  // namespace gpusched::testing
