// `gpusched bench chaos [--rounds N] [--json]`: a bounded soak under faults. A real server
// (SQLite store) and real agents run as separate processes on loopback; a client keeps
// submitting (each submission retried with its idempotency key until acknowledged); every
// round kill -9s the server or a random agent and starts it again. Every task appends to a
// ledger file when it starts, ends or is killed (attempt, node, GPUs, share, time), so the
// checks read what really ran, not what the server believes:
//   lost             acknowledged tasks that never reached a terminal state (or vanished)
//   completed_twice  tasks whose command ran to completion more than once
//   overcommits      moments a GPU's running tasks held more than its memory
// Exit status 1 when any of them is not 0.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "cli/child_process.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "cli/ledger.h"

namespace gpusched::cli {
namespace {

namespace fs = std::filesystem;
constexpr int kGpusPerAgent = 2;

struct ChaosOptions {
  int rounds = 20;
  int agents = 3;
  uint64_t seed = 0;
  bool json = false;
  bool keep = false;
};

struct ChaosResult {
  int64_t acknowledged = 0, lost = 0, completed_twice = 0, overcommits = 0;
  int64_t succeeded = 0, failed = 0, server_kills = 0, agent_kills = 0, unacknowledged = 0;
  double seconds = 0;
  nlohmann::json lost_tasks = nlohmann::json::object();  // LostTasksJson
};

void Sleep(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class ChaosCluster {
 public:
  ChaosCluster(const ChaosOptions& o, fs::path dir) : o_(o), dir_(std::move(dir)) {
    for (int i = 0; i < o_.agents; ++i) agents_.push_back(std::make_unique<ChildProcess>());
  }

  Status Start() {
    fs::create_directories(dir_ / "ledger");
    port_ = FreeLoopbackPort();
    http_port_ = FreeLoopbackPort();
    std::ofstream(dir_ / "server.yaml") << "node_heartbeat: 250ms\nnode_timeout: 10s\n"
                                           "task_heartbeat: 500ms\ntask_timeout: 10s\n"
                                           "kill_grace: 2s\n";
    GS_RETURN_IF_ERROR(StartServer());
    for (int i = 0; i < o_.agents; ++i) GS_RETURN_IF_ERROR(StartAgent(i));
    return E2eDriver(address()).WaitForNodes(o_.agents, 60'000);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  Status StartServer() {
    return server_.Start({"server", "--data-dir", (dir_ / "server").string(), "--listen",
                          address(), "--http", "127.0.0.1:" + std::to_string(http_port_),
                          "--config", (dir_ / "server.yaml").string()},
                         (dir_ / "server.log").string());
  }
  Status StartAgent(int i) {
    const std::string name = "chaos-" + std::to_string(i);
    return agents_[static_cast<size_t>(i)]->Start(
        {"agent", "--server", address(), "--name", name, "--gpus",
         std::to_string(kGpusPerAgent) + "x" + std::to_string(kLedgerGpuMib / 1024) + "GiB",
         "--data-dir", (dir_ / name).string(), "--listen", "127.0.0.1:0"},
        (dir_ / (name + ".log")).string());
  }
  ChildProcess& server() { return server_; }
  ChildProcess& agent(int i) { return *agents_[static_cast<size_t>(i)]; }
  void KillAll() {
    for (auto& a : agents_) a->Kill(SIGKILL);
    server_.Kill(SIGKILL);
  }

 private:
  const ChaosOptions& o_;
  fs::path dir_;
  int port_ = 0, http_port_ = 0;
  ChildProcess server_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

// Submits without pause until told to stop; each task is retried with the same key until the
// server acknowledges it (the server may be down at any moment).
class Submitter {
 public:
  Submitter(std::string address, fs::path ledger, uint64_t seed)
      : address_(std::move(address)), ledger_(std::move(ledger)), rng_(seed), seed_(seed) {}
  void Run(const std::atomic<bool>& stop) {
    auto d = std::make_unique<E2eDriver>(address_);
    for (int64_t n = 0; !stop.load(); ++n) {
      core::TaskSpec s;
      s.gpus = rng_.Bernoulli(0.2) ? 2 : 1;
      s.gpu_mem_mib = s.gpus == 2 ? 4096 : (rng_.Bernoulli(0.5) ? 5120 : 7168);
      s.duration_ms = 500;
      s.command = LedgerTaskCommand(ledger_, rng_.UniformInt(100, 700));
      const std::string key = "chaos-" + std::to_string(seed_) + "-" + std::to_string(n);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (;;) {
        StatusOr<uint64_t> id = d->Submit(s, key);
        if (id.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          acknowledged_.insert(*id);
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          ++unacknowledged_;
          break;
        }
        Sleep(100);  // the server is restarting
        // gRPC 1.51's channel can stay in "tcp handshaker shutdown" after the server came
        // back on the same port; a fresh channel connects at once.
        d = std::make_unique<E2eDriver>(address_);
      }
      Sleep(40);  // about 20 submissions per second
    }
  }
  std::set<uint64_t> acknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return acknowledged_;
  }
  int64_t unacknowledged() const { return unacknowledged_; }

 private:
  std::string address_;
  fs::path ledger_;
  Rng rng_;
  uint64_t seed_;
  std::mutex mu_;
  std::set<uint64_t> acknowledged_;
  int64_t unacknowledged_ = 0;
};

ChaosResult RunChaos(const ChaosOptions& o) {
  const fs::path dir = fs::temp_directory_path() / ("gpusched-chaos-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ChaosCluster cluster(o, dir);
  Status s = cluster.Start();
  if (!s.ok()) Fail(s);
  Rng rng(o.seed);
  ChaosResult r;
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  Submitter submitter(cluster.address(), dir / "ledger", o.seed + 1);
  std::thread submit([&] { submitter.Run(stop); });
  for (int round = 0; round < o.rounds; ++round) {
    Sleep(rng.UniformInt(300, 900));  // work goes on
    const bool server = rng.Bernoulli(0.3);
    const int victim = static_cast<int>(rng.UniformInt(0, o.agents - 1));
    ChildProcess& p = server ? cluster.server() : cluster.agent(victim);
    p.Kill(SIGKILL);
    Sleep(rng.UniformInt(0, 300));
    s = server ? cluster.StartServer() : cluster.StartAgent(victim);
    if (!s.ok()) Fail(s);
    ++(server ? r.server_kills : r.agent_kills);
    if (!o.json) {
      std::cerr << "bench chaos: round " << round + 1 << "/" << o.rounds << ": kill -9 "
                << (server ? std::string("server") : "agent chaos-" + std::to_string(victim))
                << ", restarted; " << submitter.acknowledged().size() << " acknowledged\n";
    }
  }
  stop = true;
  submit.join();
  // Every acknowledged task must reach a terminal state.
  E2eDriver d(cluster.address());
  const std::set<uint64_t> acked = submitter.acknowledged();
  const auto state = WaitUntilTerminal(acked, [&] { return d.List(); }, 120'000);
  cluster.KillAll();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const LedgerCheck ledger = CheckLedger(dir / "ledger", kLedgerGpuMib);
  r.acknowledged = static_cast<int64_t>(acked.size());
  r.unacknowledged = submitter.unacknowledged();
  const Outcomes outcomes = CountOutcomes(acked, state);
  r.succeeded = outcomes.succeeded;
  r.failed = outcomes.failed;
  r.lost = outcomes.lost;
  r.lost_tasks = LostTasksJson(outcomes);
  r.completed_twice = ledger.completed_twice;
  r.overcommits = ledger.overcommits;
  if (!o.keep) fs::remove_all(dir);
  return r;
}

}  // namespace

void RegisterBenchChaos(CLI::App& bench) {
  auto o = std::make_shared<ChaosOptions>();
  auto seed = std::make_shared<int64_t>(-1);
  CLI::App* cmd = bench.add_subcommand(
      "chaos", "Kill -9 the server or an agent every round; check nothing is lost or doubled");
  cmd->add_option("--rounds", o->rounds, "Rounds (one kill each)")->capture_default_str();
  cmd->add_option("--agents", o->agents, "Agents (2 simulated 16 GiB GPUs each)")
      ->capture_default_str();
  cmd->add_option("--seed", *seed, "Seed of the fault schedule (default: fresh, printed)");
  cmd->add_flag("--keep", o->keep, "Keep the run's folder (logs, ledger, database)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, seed] {
    if (o->rounds < 1 || o->agents < 1) Fail(InvalidArgument("--rounds and --agents must be >= 1"));
    o->seed = *seed >= 0 ? static_cast<uint64_t>(*seed) : Rng::FreshSeed() % 1'000'000'007;
    if (!o->json) std::cerr << "bench chaos: seed " << o->seed << "\n";
    const ChaosResult r = RunChaos(*o);
    const bool ok = r.lost == 0 && r.completed_twice == 0 && r.overcommits == 0;
    if (o->json) {
      std::cout << nlohmann::json{{"rounds", o->rounds},
                                  {"seed", o->seed},
                                  {"acknowledged", r.acknowledged},
                                  {"lost", r.lost},
                                  {"lost_tasks", r.lost_tasks},
                                  {"completed_twice", r.completed_twice},
                                  {"overcommits", r.overcommits},
                                  {"succeeded", r.succeeded},
                                  {"failed", r.failed},
                                  {"unacknowledged", r.unacknowledged},
                                  {"server_kills", r.server_kills},
                                  {"agent_kills", r.agent_kills},
                                  {"seconds", r.seconds}}
                       .dump()
                << "\n";
    } else {
      std::cout << "bench chaos: " << o->rounds << " rounds (" << r.server_kills
                << " server and " << r.agent_kills << " agent kill -9s) in " << r.seconds
                << " s, seed " << o->seed << "\n"
                << "  acknowledged      " << r.acknowledged << " (" << r.succeeded
                << " succeeded, " << r.failed << " failed)\n"
                << "  lost              " << r.lost << " " << r.lost_tasks.dump() << "\n"
                << "  completed twice   " << r.completed_twice << "\n"
                << "  GPU overcommits   " << r.overcommits << "\n";
    }
    if (!ok) ExitWith(kExitFailure);
  });
}

}  // namespace gpusched::cli
