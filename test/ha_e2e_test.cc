// The highly available control plane end to end: real etcd processes, real `gpusched server
// --store etcd` processes, real agents and the CLI, on loopback. What fails is real too:
// kill -9 of the leader under load, an etcd member, all of etcd, and a leader stopped with
// SIGSTOP past its lease.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/testing/test_dir.h"
#include "harness.h"
#include "store/local_etcd.h"

namespace gpusched::testing {
namespace {

using Json = nlohmann::json;
constexpr auto kDeadline = std::chrono::seconds(30);

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!store::LocalEtcd::Installed()) GTEST_SKIP() << "etcd is not installed (scripts/install-deps)";
  }
  // A failed run prints every server's log: a failover that did not happen within the
  // deadline says why only there (a CI run once saw no new leader for 30 s).
  void TearDown() override {
    if (!HasFailure()) return;
    for (size_t i = 0; i < servers_.size(); ++i) {
      std::cerr << "--- server" << i << ".log\n"
                << ReadFile((dir_ / ("server" + std::to_string(i) + ".log")).string()) << "\n";
    }
  }
  void StartEtcd(int members) {
    store::LocalEtcd::Options o;
    o.dir = (dir_ / "etcd").string();
    o.members = members;
    auto e = store::LocalEtcd::Start(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    etcd_ = std::move(e).value();
  }
  // Server i on free ports, lease TTL 2 s (etcd's minimum), quick liveness; `extra`: further
  // flags. t2 is 1 s: a task submitted while no agent is connected waits in the failure queue
  // for t2 (30 s by default), as long as the tests' deadlines. AllOfEtcdDown... submits right
  // after its agent starts, and again right after a re-election: it failed whenever the
  // agent reconnected just after that submission, and took 63 s when it passed (now 5 s).
  void StartServer(size_t i, const std::vector<std::string>& extra = {}) {
    while (ports_.size() <= i) {
      ports_.push_back(FreePort());
      http_.push_back(FreePort());
    }
    WriteFile((dir_ / "server.yaml").string(),
              "node_heartbeat: 250ms\nnode_timeout: 10s\ntask_heartbeat: 500ms\n"
              "task_timeout: 10s\nt2: 1s\n");
    servers_.resize(std::max(servers_.size(), i + 1));
    std::vector<std::string> args{"server", "--store", "etcd", "--etcd", etcd_->client_urls(),
                                  "--listen", Address(i), "--http",
                                  "127.0.0.1:" + std::to_string(http_[i]), "--lease-ttl", "2s",
                                  "--config", (dir_ / "server.yaml").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    servers_[i] = Proc(args, (dir_ / ("server" + std::to_string(i) + ".log")).string());
  }
  void StartAgent(const std::string& name) {
    agents_.emplace_back(std::vector<std::string>{"agent", "--server", All(), "--name", name,
                                                  "--gpus", "2x16GiB", "--listen", "127.0.0.1:0",
                                                  "--data-dir", (dir_ / name).string()},
                         (dir_ / (name + ".log")).string());
  }
  std::string Address(size_t i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  std::string All() const {
    std::string out;
    for (size_t i = 0; i < ports_.size(); ++i) out += (i ? "," : "") + Address(i);
    return out;
  }
  Json Status(const std::string& servers) {
    CliResult r = Cli({"status", "--json", "--server", servers});
    try {
      return Json::parse(r.out);
    } catch (const std::exception&) {
      return Json::object();
    }
  }
  // The index of the leader, once one leads (and says so), else -1 after the deadline.
  int WaitLeader(int not_this = -1) {
    int leader = -1;
    PollUntil(
        [&] {
          for (size_t i = 0; i < servers_.size(); ++i) {
            if (static_cast<int>(i) == not_this || !servers_[i].alive()) continue;
            Json s = Status(Address(i));
            if (s.contains("servers") && s["servers"][0].value("role", "") == "leader") {
              leader = static_cast<int>(i);
              return true;
            }
          }
          return false;
        },
        kDeadline);
    return leader;
  }
  CliResult Submit(const std::vector<std::string>& cmd) {
    std::vector<std::string> args{"submit", "--server", All(), "--gpu-mem", "1GiB", "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    return Cli(args);
  }
  std::string StateOf(const std::string& id) {
    CliResult r = Cli({"show", id, "--json", "--server", All()});
    try {
      return Json::parse(r.out).value("state", "");
    } catch (const std::exception&) {
      return "";
    }
  }

  gpusched::testing::TestDir dir_{"gpusched_ha_e2e"};
  std::unique_ptr<store::LocalEtcd> etcd_;
  std::vector<int> ports_, http_;
  std::vector<Proc> servers_;
  std::vector<Proc> agents_;
};

// Tokens are records in etcd: the first leader writes the admin token into its own data
// directory, and a token created there keeps working on the next leader after a kill -9.
TEST_F(HaTest, TokensLiveInEtcdAndKeepWorkingAcrossAFailover) {
  StartEtcd(1);
  auto data = [&](int i) { return dir_ / ("data" + std::to_string(i)); };
  for (int i = 0; i < 2; ++i) {
    StartServer(static_cast<size_t>(i), {"--auth", "token", "--data-dir", data(i).string()});
  }
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  std::string admin;
  ASSERT_TRUE(PollUntil(
      [&] {
        admin = ReadFile((data(leader) / "admin-token").string());
        if (!admin.empty() && admin.back() == '\n') admin.pop_back();
        return !admin.empty();
      },
      kDeadline));
  const std::string no_config = (dir_ / "no-config").string();
  auto as = [&](const std::string& token, std::vector<std::string> args) {
    args.insert(args.end(), {"--server", All()});
    return Cli(args, {{"GPUSCHED_TOKEN", token}, {"XDG_CONFIG_HOME", no_config}});
  };
  CliResult created = as(admin, {"token", "create", "--user", "alice", "--team", "ml"});
  ASSERT_EQ(created.code, 0) << created.err;
  const std::string alice = created.out.substr(0, created.out.find('\n'));
  ASSERT_EQ(as(alice, {"ls"}).code, 0);

  servers_[static_cast<size_t>(leader)].Kill(SIGKILL);
  const int next = WaitLeader(leader);
  ASSERT_GE(next, 0);
  CliResult ls = as(alice, {"ls"});
  EXPECT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(as("", {"ls"}).code, 4);
  // The new leader found tokens in etcd and made no second admin token.
  EXPECT_FALSE(std::filesystem::exists(data(next) / "admin-token"));
}

TEST_F(HaTest, StandbysNameTheLeaderAndStatusShowsServersAndStore) {
  StartEtcd(3);
  for (size_t i = 0; i < 3; ++i) StartServer(i);
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  Json s = Status(All());
  EXPECT_EQ(s["leader"], Address(static_cast<size_t>(leader))) << s.dump();
  ASSERT_EQ(s["servers"].size(), 3u);
  int leaders = 0;
  for (const Json& srv : s["servers"]) leaders += srv["role"] == "leader";
  EXPECT_EQ(leaders, 1);
  EXPECT_EQ(s["store"]["kind"], "etcd");
  EXPECT_EQ(s["store"]["members"].size(), 3u);
  EXPECT_TRUE(s["store"]["healthy"].get<bool>());

  const size_t standby = (static_cast<size_t>(leader) + 1) % 3;
  // /healthz on a standby: 200 with its role and the leader in the body.
  const std::string health = HttpGet(http_[standby], "/healthz");
  Json h = Json::parse(health);
  EXPECT_EQ(h["role"], "standby");
  EXPECT_EQ(h["leader"], Address(static_cast<size_t>(leader)));
  // A client given only the standby follows it to the leader.
  CliResult ls = Cli({"ls", "--json", "--server", Address(standby)});
  EXPECT_EQ(ls.code, 0) << ls.err;
}

TEST_F(HaTest, KillMinus9OfTheLeaderUnderLoadFailsOverWithinTtlPlusOneSecondLosingNothing) {
  // The benchmark is the load generator and the checker: a ledger of what really ran.
  CliResult r = Cli({"bench", "failover", "--kills", "2", "--lease-ttl", "2", "--seed", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["kills"], 2);
  EXPECT_GT(j["acknowledged"].get<int>(), 0);
  EXPECT_EQ(j["lost"], 0);
  EXPECT_EQ(j["completed_twice"], 0);
  // A standby leads, and stores work, within the lease TTL + 1 s. (Not asserted under
  // AddressSanitizer, whose slowdown is not the product's; the checks above still are.)
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LE(j["failover_p99_ms"].get<double>(), 3'000.0) << r.out;
#endif
}

TEST_F(HaTest, LosingOneEtcdMemberOfThreeDoesNotInterrupt) {
  StartEtcd(3);
  StartServer(0);
  StartServer(1);
  ASSERT_GE(WaitLeader(), 0);
  StartAgent("n1");
  CliResult before = Submit({"true"});
  ASSERT_EQ(before.code, 0) << before.err;
  etcd_->Kill(0);
  // Every submission goes on being accepted, and the leader stays the leader. When the killed
  // member led etcd's raft, the first write waits for etcd to elect another (its election
  // timeout, 1 s by default, randomized up to 2 s): etcd itself would hold that write 7 s, the
  // store's client moves it to another member after one 1.5 s attempt. The bound below is
  // not a latency goal (a loaded CI machine stretches every step): it only tells a write
  // moved to a surviving member from one that waited out etcd's own 7 s or the CLI's deadline.
  const int leader = WaitLeader();
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    CliResult r = Submit({"true"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(6500));
    std::string id = r.out.substr(0, r.out.find('\n'));
    EXPECT_TRUE(PollUntil([&] { return StateOf(id) == "succeeded"; }, kDeadline)) << id;
  }
  EXPECT_EQ(WaitLeader(), leader);
  Json s = Status(All());
  int healthy = 0;
  for (const Json& m : s["store"]["members"]) healthy += m["healthy"].get<bool>();
  EXPECT_EQ(healthy, 2) << s.dump();
  EXPECT_TRUE(s["store"]["healthy"].get<bool>());
}

TEST_F(HaTest, AllOfEtcdDownRefusesWritesClearlyAndResumesByItself) {
  StartEtcd(1);
  StartServer(0);
  ASSERT_GE(WaitLeader(), 0);
  StartAgent("n1");
  CliResult first = Submit({"true"});
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string id = first.out.substr(0, first.out.find('\n'));
  ASSERT_TRUE(PollUntil([&] { return StateOf(id) == "succeeded"; }, kDeadline));

  etcd_->KillAll();
  CliResult refused = Submit({"true"});
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("etcd"), std::string::npos) << refused.err;

  ASSERT_TRUE(etcd_->Restart(0).ok());
  ASSERT_TRUE(etcd_->WaitHealthy(20'000).ok());
  // The server campaigns again by itself, restores, and takes work.
  CliResult again;
  ASSERT_TRUE(PollUntil(
      [&] {
        again = Submit({"true"});
        return again.code == 0;
      },
      kDeadline))
      << again.err;
  const std::string id2 = again.out.substr(0, again.out.find('\n'));
  EXPECT_TRUE(PollUntil([&] { return StateOf(id2) == "succeeded"; }, kDeadline))
      << "task " << id2 << " is " << StateOf(id2) << "\nserver:\n"
      << servers_[0].Log() << "\nagent:\n" << agents_[0].Log();
  EXPECT_EQ(StateOf(id), "succeeded");  // acknowledged before the outage: still there
}

TEST_F(HaTest, ALeaderStoppedPastItsLeaseIsFencedAndStepsDown) {
  StartEtcd(1);
  StartServer(0);
  ASSERT_EQ(WaitLeader(), 0);
  StartServer(1);
  StartAgent("n1");
  ASSERT_EQ(Submit({"true"}).code, 0);
  const std::string old_health = HttpGet(http_[0], "/healthz");
  ASSERT_NE(old_health.find("leader"), std::string::npos);

  servers_[0].Signal(SIGSTOP);
  const int next = WaitLeader(0);
  ASSERT_EQ(next, 1);
  CliResult during = Submit({"true"});
  ASSERT_EQ(during.code, 0) << during.err;
  const std::string id = during.out.substr(0, during.out.find('\n'));

  servers_[0].Signal(SIGCONT);
  // Resumed, the old leader finds its lease gone (a write would be fenced) and steps down.
  EXPECT_TRUE(PollUntil([&] {
    Json s = Status(Address(0));
    return s.contains("servers") && s["servers"][0].value("role", "") == "standby";
  }, kDeadline));
  EXPECT_EQ(WaitLeader(), 1);
  EXPECT_TRUE(PollUntil([&] { return StateOf(id) == "succeeded"; }, kDeadline));
  EXPECT_NE(servers_[0].Log().find("stepping down as leader"), std::string::npos) << servers_[0].Log();
}

// Issue 39, the rolling upgrade of docs/upgrades.md, with the one version of the binaries
// there is: each process is stopped (SIGTERM, as systemd does) and started again on the same
// flags and data directory, as an upgrade replaces its binary. The agents one by one, each
// while a task runs on it: the new agent adopts the task (it is not re-run, no failure is
// counted). Then the servers of the HA group one by one, the standby first: the leader's stop
// resigns its lease and the restarted standby takes over. Both tasks finish succeeded, once.
TEST_F(HaTest, Issue39_RollingUpgradeOfAgentsThenServersKeepsRunningTasks) {
  StartEtcd(1);
  StartServer(0);
  StartServer(1);
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  const std::vector<std::string> names = {"n1", "n2"};
  for (const std::string& name : names) StartAgent(name);
  const std::string gate = (dir_ / "gate").string();
  const std::string runs = (dir_ / "runs.txt").string();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {  // two GPUs each: one task per node
    CliResult r = Cli({"submit", "--server", All(), "--gpus", "2", "--", "sh", "-c",
                       "echo \"start $GPUSCHED_TASK_ID\" >> " + runs + "; while [ ! -e " + gate +
                           " ]; do [ -d " + dir_.path().string() + " ] || exit 1; sleep 0.05; done"});
    ASSERT_EQ(r.code, 0) << r.err;
    ids.push_back(r.out.substr(0, r.out.find('\n')));
  }
  auto show = [&](const std::string& id) {
    CliResult r = Cli({"show", id, "--json", "--server", All()});
    return r.code == 0 ? Json::parse(r.out) : Json::object();
  };
  auto all_running = [&] {
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
      return show(id).value("state", "") == "running";
    });
  };
  ASSERT_TRUE(PollUntil(all_running, kDeadline)) << show(ids[0]).dump() << show(ids[1]).dump();

  auto connected = [&](const std::string& name) {
    CliResult r = Cli({"nodes", "--json", "--server", All()});
    if (r.code != 0) return false;
    for (const Json& n : Json::parse(r.out)) {
      if (n["name"] == name) return n.value("connected", false);
    }
    return false;
  };
  for (size_t i = 0; i < names.size(); ++i) {
    agents_[i].Kill(SIGTERM);
    StartAgent(names[i]);  // the same flags and data directory
    std::swap(agents_[i], agents_.back());
    agents_.pop_back();
    EXPECT_TRUE(PollUntil(
        [&] {
          return agents_[i].Log().find("serving on") != std::string::npos &&
                 connected(names[i]) && all_running();
        },
        kDeadline))
        << agents_[i].Log();
  }
  const int standby = 1 - leader;
  servers_[static_cast<size_t>(standby)].Kill(SIGTERM);
  StartServer(static_cast<size_t>(standby));
  servers_[static_cast<size_t>(leader)].Kill(SIGTERM);
  ASSERT_EQ(WaitLeader(leader), standby);
  StartServer(static_cast<size_t>(leader));
  EXPECT_TRUE(all_running());

  WriteFile(gate, "");
  for (const std::string& id : ids) {
    EXPECT_TRUE(PollUntil([&] { return show(id).value("state", "") == "succeeded"; }, kDeadline))
        << show(id).dump();
    const Json t = show(id);
    EXPECT_EQ(t["attempts"], 1) << t.dump();
    EXPECT_EQ(t["fail_cnt"], 0) << t.dump();
  }
  const std::string started = ReadFile(runs);
  EXPECT_EQ(std::count(started.begin(), started.end(), '\n'), 2) << started;
}

}  // namespace
}  // namespace gpusched::testing
