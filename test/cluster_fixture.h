#pragma once
// A fixture with a real `gpusched server` (SQLite in a fresh data directory, short timings
// from a config file) and helpers to start agents and run CLI commands against it.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"

namespace gpusched::testing {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// Generous: the tests run on a loaded 2-core machine, also under ASan.
inline constexpr std::chrono::milliseconds kDeadline = 90s;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched_e2e_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    WriteFile(path("server.yaml"),
              "t1: 500ms\nt2: 300ms\nfail_max: 2\nnode_timeout: 2s\nnode_lost_after: 2s\n"
              "task_timeout: 4s\n"
              "node_heartbeat: 200ms\ntask_heartbeat: 300ms\nprobe_interval: 1s\n"
              "kill_grace: 1s\n" + ExtraServerConfig());
    port_ = FreePort();
    http_port_ = FreePort();
    StartServer();
  }
  void TearDown() override {
    std::vector<std::string> agent_names;
    for (const auto& [name, proc] : agents_) agent_names.push_back(name);
    agents_.clear();
    server_.Kill(SIGTERM);
    if (HasFailure()) {
      std::cerr << "server log:\n" << ReadFile(path("server.log")) << "\n";
      for (const std::string& name : agent_names) {  // the end of each agent's log
        const std::string log = ReadFile(path(name + ".log"));
        std::cerr << "agent " << name << " log (last 4 KiB):\n"
                  << log.substr(log.size() > 4096 ? log.size() - 4096 : 0) << "\n";
      }
    }
    std::filesystem::remove_all(dir_);
  }

  // Further server.yaml lines of a derived fixture (issue 37: queue_order keys).
  virtual std::string ExtraServerConfig() const { return ""; }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }

  void StartServer() {
    std::vector<std::string> args{"server", "--listen", server(), "--http",
                                  "127.0.0.1:" + std::to_string(http_port_), "--data-dir",
                                  path("data"), "--config", path("server.yaml")};
    args.insert(args.end(), server_flags_.begin(), server_flags_.end());
    server_ = Proc(args, path("server.log"));
    ASSERT_TRUE(PollUntil([&] { return ServerAnswers(); }, kDeadline))
        << ReadFile(path("server.log"));
  }
  // Whether the server started answers the CLI (fixtures with authentication find their
  // token first).
  virtual bool ServerAnswers() { return Run({"nodes"}).code == 0; }
  // Further flags agent `name` needs to be let in (an agent token with --auth token).
  virtual std::vector<std::string> AgentAuthFlags(const std::string& /*name*/) { return {}; }
  // `extra`: further `gpusched agent` flags.
  void StartAgent(const std::string& name, const std::string& gpus,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"agent", "--server", server(), "--name", name, "--gpus", gpus,
                                  "--simulate", "--data-dir", path(name)};
    args.insert(args.end(), agent_flags_.begin(), agent_flags_.end());
    for (std::string& flag : AgentAuthFlags(name)) args.push_back(std::move(flag));
    args.insert(args.end(), extra.begin(), extra.end());
    agents_[name] = std::make_unique<Proc>(args, path(name + ".log"));
    ASSERT_TRUE(PollUntil(
        [&] {
          for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
            if (n["name"] == name && n["connected"] == true && n["available"] == true) return true;
          }
          return false;
        },
        kDeadline))
        << ReadFile(path(name + ".log"));
  }

  CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--server", server()});
    return Cli(args);
  }
  uint64_t Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    CliResult r = Run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }
  Json Task(uint64_t id) {
    CliResult r = Run({"show", std::to_string(id), "--json"});
    return r.code == 0 ? Json::parse(r.out) : Json::object();
  }
  std::map<uint64_t, Json> Tasks() {
    std::map<uint64_t, Json> out;
    CliResult r = Run({"ls", "--all", "--json"});
    if (r.code != 0) return out;
    for (const Json& t : Json::parse(r.out)) out[t["id"].get<uint64_t>()] = t;
    return out;
  }
  bool WaitState(uint64_t id, const std::string& state) {
    return PollUntil([&] { return Task(id).value("state", "") == state; }, kDeadline);
  }

  // A shell prefix that blocks a task until OpenGate(name) is called, so a test decides when
  // tasks finish instead of racing `sleep` against its own polling (which loses under ASan,
  // where every CLI call is slow).
  // Tasks outlive their agents (each runs under gpusched-shim), so a gated task whose agent
  // was killed also gives up once the test's folder is gone (TearDown).
  std::string Gated(const std::string& name, const std::string& body) {
    return "while [ ! -e '" + path("gate-" + name) + "' ]; do [ -d '" + dir_.string() +
           "' ] || exit 1; sleep 0.05; done; " + body;
  }
  void OpenGate(const std::string& name) { WriteFile(path("gate-" + name), ""); }

  std::filesystem::path dir_;
  std::vector<std::string> server_flags_;  // further `gpusched server` flags
  std::vector<std::string> agent_flags_;   // further `gpusched agent` flags
  int port_ = 0, http_port_ = 0;
  Proc server_;
  std::map<std::string, std::unique_ptr<Proc>> agents_;
};

// The same cluster with `--auth token`: the first start writes DATA_DIR/admin-token, and every
// Run() goes as that admin (GPUSCHED_TOKEN of this process); others act with their own token.
class AuthClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    // Only what a test gives explicitly: no token of whoever runs the tests leaks in.
    unsetenv("GPUSCHED_TOKEN");
    setenv("XDG_CONFIG_HOME",
           (std::filesystem::temp_directory_path() / "gpusched_auth_test_no_config").c_str(), 1);
    server_flags_ = {"--auth", "token"};
    // Token users (alice, bob) have no Unix accounts here: tasks run as the agent's user.
    agent_flags_ = {"--run-as-self"};
    ClusterTest::SetUp();
  }
  void TearDown() override {
    unsetenv("GPUSCHED_TOKEN");
    unsetenv("XDG_CONFIG_HOME");
    ClusterTest::TearDown();
  }
  bool ServerAnswers() override {
    if (admin_.empty()) {
      admin_ = Trimmed(ReadFile(path("data/admin-token")));
      if (admin_.empty()) return false;
      setenv("GPUSCHED_TOKEN", admin_.c_str(), 1);
    }
    return Cli({"nodes", "--server", server()}).code == 0;
  }
  // Issue 35: with --auth token and no TLS, each agent presents an agent token of its node.
  std::vector<std::string> AgentAuthFlags(const std::string& name) override {
    CliResult r = Cli({"token", "create", "--server", server(), "--agent", name});
    EXPECT_EQ(r.code, 0) << r.err;
    WriteFile(path(name + ".token"), r.out);
    return {"--token-file", path(name + ".token")};
  }
  // A token for `user` in `team`, made by the admin.
  std::string CreateToken(const std::string& user, const std::string& team) {
    CliResult r = Cli({"token", "create", "--server", server(), "--user", user, "--team", team});
    EXPECT_EQ(r.code, 0) << r.err;
    return Trimmed(r.out);
  }
  static std::string Trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  std::string admin_;
};

}  // namespace gpusched::testing
