// The highly available control plane from the command line:
//   gpusched status [--json]                 the servers, which one leads, the store's health
//   gpusched bench failover [--kills N]      kill -9 the leader under load, N times
//   gpusched ha-demo                         the one-command HA demo (./run ha-demo)
//   gpusched dev --ha                        (daemon_commands.cc) a local HA cluster

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/percentile.h"
#include "base/rng.h"
#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "cli/ha_cluster.h"
#include "cli/ledger.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "rpc/convert.h"

namespace gpusched::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

void Sleep(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double MsSince(SteadyTime t0, SteadyTime t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// ---------------------------------------------------------------- status

struct ServerAnswer {
  std::string address;
  bool reachable = false;
  std::string error;
  v1::ServerStatus status;
};

// Every server of the list (`--server`, `GPUSCHED_SERVER`, ...), asked for its status.
std::vector<ServerAnswer> AskEveryServer(const std::string& servers) {
  std::vector<ServerAnswer> answers;
  for (const std::string& address : OrFail(ResolveServerList(servers))) {
    ServerAnswer a;
    a.address = address;
    Client c(address);
    v1::ServerStatusRequest req;
    Status s = c.Call(
        [&](grpc::ClientContext& ctx) { return c.stub().GetServerStatus(&ctx, req, &a.status); },
        3);
    a.reachable = s.ok();
    if (!s.ok()) a.error = s.message();
    answers.push_back(std::move(a));
  }
  return answers;
}

// What the answers say together: the leader ("" = none known) and the server whose view of
// the store is shown (the leader, else the first that answered; null when none did).
struct ControlPlaneView {
  std::string leader;
  const ServerAnswer* store_from = nullptr;
  int healthy = 0;  // etcd members that store_from found healthy
};

ControlPlaneView ViewOf(const std::vector<ServerAnswer>& answers) {
  ControlPlaneView v;
  for (const ServerAnswer& a : answers) {
    if (!a.reachable) continue;
    if (a.status.role() == "leader") {
      v.leader = a.status.address();
      v.store_from = &a;
    }
    if (v.leader.empty() && !a.status.leader().empty()) v.leader = a.status.leader();
    if (v.store_from == nullptr) v.store_from = &a;
  }
  if (v.store_from != nullptr) {
    for (const v1::EtcdMember& m : v.store_from->status.etcd()) v.healthy += m.healthy();
  }
  return v;
}

Json StoreJson(const ControlPlaneView& v) {
  Json store = Json::object();
  if (v.store_from == nullptr) return store;
  const v1::ServerStatus& st = v.store_from->status;
  store["kind"] = st.store();
  Json members = Json::array();
  for (const v1::EtcdMember& m : st.etcd()) {
    members.push_back({{"endpoint", m.endpoint()},
                       {"healthy", m.healthy()},
                       {"raft_leader", m.raft_leader()},
                       {"version", m.version()},
                       {"db_size", m.db_size()},
                       {"error", m.error()}});
  }
  store["members"] = members;
  // etcd needs a majority; a single server's own store is healthy when it answers.
  store["healthy"] = st.etcd_size() == 0 || v.healthy * 2 > st.etcd_size();
  if (st.lease_ttl_ms() > 0) store["lease_ttl_ms"] = st.lease_ttl_ms();
  return store;
}

void PrintStatusJson(const std::vector<ServerAnswer>& answers, const ControlPlaneView& v) {
  Json servers = Json::array();
  for (const ServerAnswer& a : answers) {
    Json s = {{"address", a.address}, {"reachable", a.reachable}};
    if (a.reachable) {
      s["role"] = a.status.role();
      s["leader"] = a.status.leader();
      s["http"] = a.status.http();
      s["detail"] = a.status.detail();
      s["leader_since_ms"] = a.status.leader_since_ms();
    } else {
      s["role"] = "unreachable";
      s["error"] = a.error;
    }
    servers.push_back(s);
  }
  std::cout << Json{{"leader", v.leader.empty() ? Json(nullptr) : Json(v.leader)},
                    {"servers", servers},
                    {"store", StoreJson(v)}}
                   .dump()
            << "\n";
}

void PrintStatusText(const std::vector<ServerAnswer>& answers, const ControlPlaneView& v) {
  std::vector<std::vector<std::string>> rows{{"SERVER", "ROLE", "HTTP", "DETAIL"}};
  for (const ServerAnswer& a : answers) {
    rows.push_back({a.address, a.reachable ? a.status.role() : "unreachable",
                    a.reachable ? a.status.http() : "-",
                    a.reachable ? a.status.detail() : a.error});
  }
  PrintTable(std::cout, rows);
  std::cout << "leader: " << (v.leader.empty() ? "none" : v.leader) << "\n";
  if (v.store_from == nullptr) return;
  const v1::ServerStatus& st = v.store_from->status;
  std::cout << "store:  " << st.store();
  if (st.etcd_size() > 0) {
    std::cout << ", " << v.healthy << "/" << st.etcd_size()
              << " etcd members healthy, lease TTL " << FormatDurationMs(st.lease_ttl_ms());
  }
  std::cout << "\n";
  for (const v1::EtcdMember& m : st.etcd()) {
    std::cout << "  " << m.endpoint() << "  "
              << (m.healthy() ? "healthy" : "unhealthy: " + m.error())
              << (m.raft_leader() ? "  (raft leader)" : "") << "\n";
  }
}

void RegisterStatus(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* cmd = app.add_subcommand(
      "status", "The control plane's servers, which one leads, and the store's health");
  AddClientFlags(cmd, *flags);
  cmd->callback([flags] {
    const std::vector<ServerAnswer> answers = AskEveryServer(flags->server);
    const ControlPlaneView v = ViewOf(answers);
    if (flags->json) {
      PrintStatusJson(answers, v);
    } else {
      PrintStatusText(answers, v);
    }
    if (v.store_from == nullptr) ExitWith(kExitUnavailable);
    if (v.leader.empty()) ExitWith(kExitFailure);
  });
}

// ---------------------------------------------------------------- bench failover

struct FailoverOptions {
  int kills = 20;
  std::string stop = "kill";  // kill: SIGKILL (the lease expires); term: the leader resigns
  int64_t lease_ttl_s = 5;
  uint64_t seed = 0;
  bool json = false;
  bool keep = false;
};

// Submits through every server (following the leader) until stopped; each task is retried
// with its idempotency key until acknowledged. Records when each acknowledgement came.
class HaSubmitter {
 public:
  HaSubmitter(std::string servers, fs::path ledger, uint64_t seed)
      : servers_(std::move(servers)), ledger_(std::move(ledger)), rng_(seed), seed_(seed) {}
  void Run(const std::atomic<bool>& stop) {
    for (int64_t n = 0; !stop.load(); ++n) {
      v1::SubmitRequest req;
      core::TaskSpec s;
      s.gpus = 1;
      s.gpu_mem_mib = rng_.Bernoulli(0.5) ? 5120 : 7168;
      s.command = LedgerTaskCommand(ledger_, rng_.UniformInt(100, 500));
      rpc::TaskSpecToProto(s, req.mutable_spec());
      req.set_idempotency_key("failover-" + std::to_string(seed_) + "-" + std::to_string(n));
      v1::SubmitResponse resp;
      const SteadyTime sent = std::chrono::steady_clock::now();
      Client c(servers_);
      Status st = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Submit(&ctx, req, &resp); },
                         60);
      std::lock_guard<std::mutex> lock(mu_);
      if (st.ok()) {
        acknowledged_.insert(resp.id());
        acks_.emplace_back(sent, std::chrono::steady_clock::now());
      } else {
        ++unacknowledged_;
        last_error_ = st.message();
      }
      Sleep(30);
    }
  }
  // When the first submission sent after `t` was acknowledged, if one was. (One sent before
  // and answered after would measure the old leader, not the new one.)
  std::optional<SteadyTime> FirstAckAfter(SteadyTime t) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::lower_bound(acks_.begin(), acks_.end(), t,
                               [](const auto& ack, SteadyTime at) { return ack.first < at; });
    if (it == acks_.end()) return std::nullopt;
    return it->second;
  }
  std::set<uint64_t> acknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return acknowledged_;
  }
  int64_t unacknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return unacknowledged_;
  }

 private:
  std::string servers_;
  fs::path ledger_;
  Rng rng_;
  uint64_t seed_;
  std::mutex mu_;
  std::set<uint64_t> acknowledged_;
  std::vector<std::pair<SteadyTime, SteadyTime>> acks_;  // (sent, acknowledged), in order
  int64_t unacknowledged_ = 0;
  std::string last_error_;
};

// Runs a submitter on a thread of its own; stops and joins it when it goes out of scope (also
// when Fail() ends the command by throwing).
class LoadThread {
 public:
  explicit LoadThread(HaSubmitter& s) : thread_([this, &s] { s.Run(stop_); }) {}
  ~LoadThread() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits until every acknowledged task is terminal, listing through whichever server leads.
std::map<uint64_t, std::string> WaitTerminal(HaCluster& cluster, const std::set<uint64_t>& acked,
                                             int64_t timeout_ms) {
  return WaitUntilTerminal(
      acked,
      [&]() -> StatusOr<std::vector<v1::Task>> {
        const int leader = cluster.Leader();
        if (leader < 0) return Unavailable("no leader");
        return E2eDriver(cluster.server_address(leader)).List();
      },
      timeout_ms);
}

// What a failover run found, once every acknowledged task ended.
struct FailoverReport {
  std::vector<double> failover_ms;  // kill -> first acknowledgement after it, per kill
  std::vector<double> takeover_ms;  // kill -> another server says it leads, per kill
  size_t acknowledged = 0;
  Outcomes outcomes;
  LedgerCheck ledger;
  int64_t unacknowledged = 0;
  double seconds = 0;
};

// Kills the leader `kills` times, 1 s apart, and measures each failover: until the first
// submission acknowledged after the kill (a new leader is elected, has restored the state
// from etcd, and stores new work). Each killed server comes back as a standby.
// Issue 38: also until another server says it leads (the election alone, polled every 50 ms).
void KillLeaders(HaCluster& cluster, HaSubmitter& submitter, const FailoverOptions& o,
                 const fs::path& dir, FailoverReport& r) {
  std::vector<double>& failover_ms = r.failover_ms;
  for (int k = 0; k < o.kills; ++k) {
    Sleep(1'000);  // work goes on under this leader
    auto leader = cluster.WaitForLeader(30'000);
    if (!leader.ok()) Fail(leader.status());
    const auto killed_at = std::chrono::steady_clock::now();
    const int sig = o.stop == "term" ? SIGTERM : SIGKILL;
    cluster.server(*leader).Signal(sig);
    auto next = cluster.WaitForLeader(60'000, *leader);
    if (!next.ok()) Fail(next.status());
    r.takeover_ms.push_back(MsSince(killed_at, std::chrono::steady_clock::now()));
    cluster.server(*leader).Kill(sig);  // waits for its exit
    std::optional<SteadyTime> ack;
    while (!(ack = submitter.FirstAckAfter(killed_at)) &&
           std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(60)) {
      Sleep(5);
    }
    if (!ack) {
      Fail(Unavailable("no submission was acknowledged within 60 s of a leader kill (logs in " +
                       dir.string() + ")"));
    }
    failover_ms.push_back(MsSince(killed_at, *ack));
    if (!o.json) {
      std::cerr << "bench failover: kill " << k + 1 << "/" << o.kills << ": leader "
                << cluster.server_address(*leader) << " SIG" << (o.stop == "term" ? "TERM" : "KILL")
                << ", new leader after " << static_cast<int64_t>(r.takeover_ms.back())
                << " ms, storing work after " << static_cast<int64_t>(failover_ms.back())
                << " ms\n";
    }
    if (Status s = cluster.StartServer(*leader); !s.ok()) Fail(s);  // back as a standby
  }
}

// A 3-server HA cluster in `dir` under load from one submitter while its leaders are killed;
// then every acknowledged task is waited for and the ledger checked.
FailoverReport RunFailover(const FailoverOptions& o, const fs::path& dir) {
  HaClusterOptions co;
  co.dir = dir;
  co.lease_ttl_s = o.lease_ttl_s;
  co.gpus = "2x16GiB";
  HaCluster cluster(co);
  if (Status s = cluster.Start(); !s.ok()) Fail(s);
  fs::create_directories(dir / "ledger");
  HaSubmitter submitter(cluster.servers(), dir / "ledger", o.seed);
  LoadThread load(submitter);  // stops and joins even when Fail() throws
  FailoverReport r;
  const auto t_start = std::chrono::steady_clock::now();
  KillLeaders(cluster, submitter, o, dir, r);
  load.Stop();
  const std::set<uint64_t> acked = submitter.acknowledged();
  const auto state = WaitTerminal(cluster, acked, 120'000);
  cluster.KillAll();
  r.seconds = MsSince(t_start, std::chrono::steady_clock::now()) / 1000;
  r.ledger = CheckLedger(dir / "ledger", kLedgerGpuMib);
  r.outcomes = CountOutcomes(acked, state);
  r.acknowledged = acked.size();
  r.unacknowledged = submitter.unacknowledged();
  return r;
}

void PrintFailover(const FailoverOptions& o, const FailoverReport& r) {
  const double p50 = PercentileOf(r.failover_ms, 50), p99 = PercentileOf(r.failover_ms, 99);
  const double max = *std::max_element(r.failover_ms.begin(), r.failover_ms.end());
  if (o.json) {
    std::cout << Json{{"kills", o.kills},
                      {"seed", o.seed},
                      {"lease_ttl_s", o.lease_ttl_s},
                      {"failover_p50_ms", p50},
                      {"failover_p99_ms", p99},
                      {"failover_max_ms", max},
                      {"stop", o.stop},
                      {"takeover_p50_ms", PercentileOf(r.takeover_ms, 50)},
                      {"takeover_p99_ms", PercentileOf(r.takeover_ms, 99)},
                      {"acknowledged", r.acknowledged},
                      {"lost", r.outcomes.lost},
                      {"lost_tasks", LostTasksJson(r.outcomes)},
                      {"completed_twice", r.ledger.completed_twice},
                      {"overcommits", r.ledger.overcommits},
                      {"succeeded", r.outcomes.succeeded},
                      {"failed", r.outcomes.failed},
                      {"unacknowledged", r.unacknowledged},
                      {"seconds", r.seconds}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << "bench failover: " << o.kills << " leader kill -9s, lease TTL " << o.lease_ttl_s
            << " s, " << r.seconds << " s, seed " << o.seed << "\n"
            << "  failover p50 / p99 / max   " << static_cast<int64_t>(p50) << " / "
            << static_cast<int64_t>(p99) << " / " << static_cast<int64_t>(max) << " ms\n"
            << "  new leader p50 / p99       "
            << static_cast<int64_t>(PercentileOf(r.takeover_ms, 50)) << " / "
            << static_cast<int64_t>(PercentileOf(r.takeover_ms, 99)) << " ms\n"
            << "  acknowledged      " << r.acknowledged << " (" << r.outcomes.succeeded
            << " succeeded, " << r.outcomes.failed << " failed)\n"
            << "  lost              " << r.outcomes.lost << " " << LostTasksJson(r.outcomes).dump()
            << "\n"
            << "  completed twice   " << r.ledger.completed_twice << "\n"
            << "  GPU overcommits   " << r.ledger.overcommits << "\n";
}

void RegisterBenchFailover(CLI::App& bench) {
  auto o = std::make_shared<FailoverOptions>();
  auto seed = std::make_shared<int64_t>(-1);
  CLI::App* cmd = bench.add_subcommand(
      "failover",
      "Kill -9 the leader of a 3-server HA control plane under load; failover time, lost and "
      "doubled tasks");
  cmd->add_option("--kills", o->kills, "Leader kills")->capture_default_str();
  cmd->add_option("--lease-ttl", o->lease_ttl_s, "Leader lease in seconds")->capture_default_str();
  cmd->add_option("--stop", o->stop,
                  "How the leader goes: kill (SIGKILL: its lease expires) or term (SIGTERM: it "
                  "resigns, and standbys see the key go through etcd's watch)")
      ->capture_default_str();
  cmd->add_option("--seed", *seed, "Seed of the load (default: fresh, printed)");
  cmd->add_flag("--keep", o->keep, "Keep the run's folder (logs, ledger, etcd data)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, seed] {
    if (o->kills < 1) Fail(InvalidArgument("--kills: must be >= 1, got " + std::to_string(o->kills)));
    if (o->lease_ttl_s < 2) Fail(InvalidArgument("--lease-ttl: must be >= 2 (etcd's minimum lease)"));
    if (o->stop != "kill" && o->stop != "term") {
      Fail(InvalidArgument("--stop: \"" + o->stop + "\" (use kill or term)"));
    }
    o->seed = *seed >= 0 ? static_cast<uint64_t>(*seed) : Rng::FreshSeed() % 1'000'000'007;
    if (!o->json) std::cerr << "bench failover: seed " << o->seed << "\n";
    const fs::path dir = fs::temp_directory_path() / ("gpusched-failover-" + std::to_string(getpid()));
    fs::remove_all(dir);
    const FailoverReport r = RunFailover(*o, dir);
    if (!o->keep) fs::remove_all(dir);
    PrintFailover(*o, r);
    if (r.outcomes.lost != 0 || r.ledger.completed_twice != 0 || r.ledger.overcommits != 0) {
      ExitWith(kExitFailure);
    }
  });
}

// ---------------------------------------------------------------- ha-demo

void RegisterHaDemo(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ha-demo", "A 3-member etcd, 3 servers and 2 agents: submit work, kill the leader, watch "
                 "a standby take over");
  cmd->callback([] {
    const fs::path dir = fs::temp_directory_path() / ("gpusched-ha-demo-" + std::to_string(getpid()));
    fs::remove_all(dir);
    HaClusterOptions co;
    co.dir = dir;
    co.gpus = "2x16GiB";
    HaCluster cluster(co);
    std::cout << "ha-demo: starting a 3-member etcd cluster (TLS, client certificates), 3 "
                 "servers and 2 agents...\n";
    if (Status s = cluster.Start(); !s.ok()) Fail(s);
    const int leader = cluster.Leader();
    std::cout << "ha-demo: servers " << cluster.servers() << "\n"
              << "ha-demo: leader is " << cluster.server_address(leader) << " (lease TTL 5 s)\n";
    fs::create_directories(dir / "ledger");
    HaSubmitter submitter(cluster.servers(), dir / "ledger", 7);
    LoadThread load(submitter);  // stops and joins even when Fail() throws
    Sleep(2'000);
    std::cout << "ha-demo: " << submitter.acknowledged().size()
              << " tasks acknowledged; kill -9 of the leader now\n";
    const auto killed_at = std::chrono::steady_clock::now();
    cluster.server(leader).Kill(SIGKILL);
    auto next = cluster.WaitForLeader(30'000, leader);
    if (!next.ok()) Fail(next.status());
    const double elected = MsSince(killed_at, std::chrono::steady_clock::now());
    std::optional<SteadyTime> ack;
    while (!(ack = submitter.FirstAckAfter(killed_at))) Sleep(5);
    std::cout << "ha-demo: " << cluster.server_address(*next) << " leads after "
              << static_cast<int64_t>(elected) << " ms and stored new work after "
              << static_cast<int64_t>(MsSince(killed_at, *ack)) << " ms\n";
    (void)cluster.StartServer(leader);
    Sleep(2'000);
    load.Stop();
    const std::set<uint64_t> acked = submitter.acknowledged();
    std::cout << "ha-demo: load stopped; waiting for " << acked.size() << " tasks to finish...\n";
    const auto state = WaitTerminal(cluster, acked, 120'000);
    const LedgerCheck ledger = CheckLedger(dir / "ledger", kLedgerGpuMib);
    const int64_t done = CountOutcomes(acked, state).succeeded;
    cluster.KillAll();
    std::cout << "ha-demo: summary: " << acked.size() << " acknowledged, " << done
              << " succeeded, " << acked.size() - static_cast<size_t>(done)
              << " not succeeded, " << ledger.completed_twice << " completed twice\n"
              << "ha-demo: run your own with `gpusched dev --ha`, then `gpusched status "
                 "--server <the servers>`\n";
    fs::remove_all(dir);
    if (static_cast<size_t>(done) != acked.size() || ledger.completed_twice != 0) {
      ExitWith(kExitFailure);
    }
  });
}

}  // namespace

void RunDevHa(int agents, const std::string& gpus, const std::string& executor,
              int64_t lease_ttl_s) {
  HaClusterOptions co;
  co.dir = fs::temp_directory_path() / ("gpusched-dev-ha-" + std::to_string(getpid()));
  fs::remove_all(co.dir);
  co.agents = agents;
  co.gpus = gpus;
  co.executor = executor;
  co.lease_ttl_s = lease_ttl_s;
  BlockStopSignals();
  HaCluster cluster(co);
  if (Status s = cluster.Start(); !s.ok()) Fail(s);
  std::cerr << "gpusched dev --ha: etcd " << cluster.etcd().client_urls() << "\n"
            << "  servers: " << cluster.servers() << " (leader "
            << cluster.server_address(std::max(0, cluster.Leader())) << ")\n"
            << "  try:     export GPUSCHED_SERVER=" << cluster.servers() << "\n"
            << "           gpusched status; gpusched submit --gpu-mem 4GiB -- sleep 5\n"
            << "  logs in " << co.dir.string() << "; Ctrl-C stops everything.\n";
  WaitForStopSignal();
  cluster.KillAll();
  fs::remove_all(co.dir);
}

void RegisterHaCommands(CLI::App& app, CLI::App& bench) {
  RegisterStatus(app);
  RegisterHaDemo(app);
  RegisterBenchFailover(bench);
}

}  // namespace gpusched::cli
