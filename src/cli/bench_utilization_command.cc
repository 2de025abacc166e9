// `gpusched bench utilization [--agents N] [--gpus-per-agent G] [--rounds R] [--waiters W]
// [--seed S] [--binary PATH] [--json]`: how long a GPU stays idle after it is released while
// tasks wait for one (issue 37). The real path: a `gpusched server` process (its default
// configuration: capacity_wait failure_queue, t1 5s, t2 30s; SQLite store) and N `gpusched
// agent` processes of G simulated GPUs, on loopback, with real task processes (sleep). The
// server and agents are this binary, or `--binary PATH` (another build's gpusched-full: the
// same bench against another version of the server, e.g. one before a change).
//
// Each round fills the cluster with one G-GPU blocker per node, submits W one-GPU waiters,
// waits until the scheduler has tried each of them (they wait for capacity: in FQ under
// CN115981827A claim 3), waits a seeded random 0-1000 ms more (so the release falls anywhere
// in the server's loop and t1/t2 cycles), then releases one node's GPUs by, in turn:
//   cancel    a blocker is cancelled (`gpusched cancel`);
//   end       a blocker that runs `sleep 3` exits 0 by itself;
//   uncordon  a node that was cordoned while empty is uncordoned.
// A sample is the time from the release (the client's clock just before the cancel or
// uncordon call; the server's finish time of the blocker that ended) to the server's
// `started_ms` of each waiter that the release let start (the agent reported its process
// running: real starts only). All share this process's wall clock.
// `gpu_idle_while_waiting_s` sums, over those waiters, release -> start: each of them waited
// while the GPU it then took stood idle (every waiter needs 1 GPU, so each freed GPU fits one).
// A waiter not started `--round-timeout` after its release counts the whole timeout and is
// reported in `not_started`.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/percentile.h"
#include "base/rng.h"
#include "base/units.h"
#include "cli/child_process.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "rpc/convert.h"

namespace gpusched::cli {
namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The control plane as a client sees it: submit, read, cancel, cordon.
class UtilDriver {
 public:
  explicit UtilDriver(const std::string& address) : client_(address) {}

  uint64_t Submit(int gpus, const std::string& command) {
    core::TaskSpec spec;
    spec.gpus = gpus;
    spec.command = {"sh", "-c", command};
    v1::SubmitRequest req;
    rpc::TaskSpecToProto(spec, req.mutable_spec());
    req.set_idempotency_key("bench-utilization-" + std::to_string(getpid()) + "-" +
                            std::to_string(++submitted_));
    v1::SubmitResponse resp;
    Check(client_.Call([&](grpc::ClientContext& ctx) {
      return client_.stub().Submit(&ctx, req, &resp);
    }));
    return resp.id();
  }
  v1::Task Get(uint64_t id) {
    v1::GetTaskRequest req;
    req.set_id(id);
    v1::Task t;
    Check(client_.Call([&](grpc::ClientContext& ctx) {
      return client_.stub().GetTask(&ctx, req, &t);
    }));
    return t;
  }
  void Cancel(uint64_t id) {
    v1::CancelRequest req;
    req.set_id(id);
    v1::CancelResponse resp;
    (void)client_.Call([&](grpc::ClientContext& ctx) {  // already ended: nothing to do
      return client_.stub().Cancel(&ctx, req, &resp);
    });
  }
  void Cordon(const std::string& node, bool cordon) {
    v1::CordonRequest req;
    req.set_node(node);
    req.set_cordon(cordon);
    v1::NodeResponse resp;
    Check(client_.Call([&](grpc::ClientContext& ctx) {
      return client_.stub().Cordon(&ctx, req, &resp);
    }));
  }
  // Polls `pred` on task `id` every 5 ms; false after `timeout_ms`.
  template <typename Pred>
  bool WaitFor(uint64_t id, Pred pred, int64_t timeout_ms) {
    const int64_t until = WallMs() + timeout_ms;
    while (WallMs() < until) {
      if (pred(Get(id))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  static void Check(const Status& s) {
    if (!s.ok()) Fail(s);
  }
  Client client_;
  int64_t submitted_ = 0;
};

bool Running(const v1::Task& t) { return t.state() == "running"; }
bool Terminal(const v1::Task& t) {
  return t.state() == "succeeded" || t.state() == "failed" || t.state() == "cancelled";
}
// The scheduler tried it and found no room (its reason is a pass's, not "submitted").
bool Tried(const v1::Task& t) {
  return t.state() == "pending" && (t.placement_failures() > 0 || t.reason() != "submitted");
}

struct Options {
  int agents = 2, gpus = 4, rounds = 6, waiters = 2;
  uint64_t seed = 37;
  std::string binary;  // "" = this executable
  int64_t round_timeout_ms = 45'000;
};

struct Result {
  std::vector<double> samples_ms;  // release -> start, one per waiter started
  double idle_gpu_ms = 0;
  int not_started = 0;
  std::map<std::string, std::vector<double>> by_kind;
};

// One round; see the file comment. Leaves no live task and no cordoned node behind.
void RunRound(UtilDriver& d, const Options& o, const std::string& kind, Rng& rng, Result& r) {
  std::vector<uint64_t> blockers, waiters;
  const int64_t budget = 60'000;
  if (kind == "uncordon") d.Cordon("dev-1", true);
  for (int n = 0; n < o.agents; ++n) {
    if (kind == "uncordon" && n == 0) continue;
    blockers.push_back(d.Submit(o.gpus, kind == "end" && n == 0 ? "sleep 3" : "sleep 600"));
  }
  for (uint64_t b : blockers) {
    if (!d.WaitFor(b, Running, budget)) Fail(Unavailable("bench utilization: blocker not running"));
  }
  for (int w = 0; w < o.waiters; ++w) waiters.push_back(d.Submit(1, "sleep 600"));
  for (uint64_t w : waiters) {
    if (!d.WaitFor(w, Tried, budget)) Fail(Unavailable("bench utilization: waiter never tried"));
  }
  int64_t release_ms = 0;
  if (kind == "end") {
    if (!d.WaitFor(blockers[0], Terminal, budget)) Fail(Unavailable("bench utilization: no end"));
    release_ms = d.Get(blockers[0]).finished_ms();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng.UniformInt(0, 999)));
    release_ms = WallMs();
    if (kind == "cancel") d.Cancel(blockers[0]);
    if (kind == "uncordon") d.Cordon("dev-1", false);
  }
  for (uint64_t w : waiters) {
    const int64_t left = release_ms + o.round_timeout_ms - WallMs();
    const bool started = left > 0 && d.WaitFor(w, [](const v1::Task& t) { return t.started_ms() > 0; }, left);
    const double ms = started ? double(d.Get(w).started_ms() - release_ms)
                              : double(o.round_timeout_ms);
    if (!started) ++r.not_started;
    r.samples_ms.push_back(ms);
    r.by_kind[kind].push_back(ms);
    r.idle_gpu_ms += ms;
  }
  for (uint64_t id : blockers) d.Cancel(id);
  for (uint64_t id : waiters) d.Cancel(id);
  for (uint64_t id : blockers) (void)d.WaitFor(id, Terminal, budget);
  for (uint64_t id : waiters) (void)d.WaitFor(id, Terminal, budget);
}

// The server and agent processes of one run.
struct UtilCluster {
  ChildProcess server;
  std::vector<std::unique_ptr<ChildProcess>> agents;
};

void AddUtilizationFlags(CLI::App* cmd, Options& o, bool& json) {
  cmd->add_flag("--json", json, "Print one JSON object");
  cmd->add_option("--agents", o.agents, "Agents (nodes dev-1..dev-N)")->capture_default_str();
  cmd->add_option("--gpus-per-agent", o.gpus, "Simulated GPUs per agent")->capture_default_str();
  cmd->add_option("--rounds", o.rounds, "Releases (cancel, end, uncordon in turn)")
      ->capture_default_str();
  cmd->add_option("--waiters", o.waiters, "One-GPU tasks waiting at each release")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the delays before each release")
      ->capture_default_str();
  cmd->add_option("--binary", o.binary,
                  "The gpusched-full that runs the server and agents (default: this one)");
}

void CheckUtilizationOptions(const Options& o) {
  if (o.agents < 2 || o.gpus < 1 || o.rounds < 1 || o.waiters < 1 || o.waiters > o.gpus) {
    Fail(InvalidArgument("--agents must be >= 2, --gpus-per-agent, --rounds, --waiters >= 1 "
                         "and --waiters <= --gpus-per-agent (got " +
                         std::to_string(o.agents) + ", " + std::to_string(o.gpus) + ", " +
                         std::to_string(o.rounds) + ", " + std::to_string(o.waiters) + ")"));
  }
}

// Starts `args` of --binary (default: this executable) as `p`, its output in DIR/log.
void StartChild(const Options& o, const std::string& dir, ChildProcess& p,
                const std::vector<std::string>& args, const std::string& log) {
  Status s = o.binary.empty() ? p.Start(args, dir + "/" + log)
                              : p.StartProgram(o.binary, args, dir + "/" + log);
  if (!s.ok()) Fail(s);
}

// A server at `address` (its default configuration) and agents dev-1..dev-N of simulated GPUs.
void StartUtilCluster(const Options& o, const std::string& dir, const std::string& address,
                      UtilCluster& cluster) {
  StartChild(o, dir, cluster.server,
             {"server", "--data-dir", dir + "/server", "--listen", address, "--http",
              "127.0.0.1:" + std::to_string(FreeLoopbackPort())},
             "server.log");
  for (int i = 1; i <= o.agents; ++i) {
    const std::string name = "dev-" + std::to_string(i);
    cluster.agents.push_back(std::make_unique<ChildProcess>());
    StartChild(o, dir, *cluster.agents.back(),
               {"agent", "--server", address, "--name", name, "--gpus",
                std::to_string(o.gpus) + "x80GiB", "--simulate", "--data-dir", dir + "/" + name,
                "--listen", "127.0.0.1:0"},
               name + ".log");
  }
}

// Every round, once all agents joined: cancel, end and uncordon in turn.
Result RunRounds(const std::string& address, const Options& o) {
  Result r;
  E2eDriver probe(address);
  if (Status ready = probe.WaitForNodes(o.agents, 60'000); !ready.ok()) Fail(ready);
  UtilDriver d(address);
  Rng rng(o.seed);
  const char* kinds[] = {"cancel", "end", "uncordon"};
  for (int round = 0; round < o.rounds; ++round) RunRound(d, o, kinds[round % 3], rng, r);
  return r;
}

void PrintUtilizationJson(const Options& o, const Result& r, int64_t t2_ms) {
  nlohmann::json out{{"binary", o.binary.empty() ? std::string("self") : o.binary},
                     {"agents", o.agents},
                     {"gpus_per_agent", o.gpus},
                     {"rounds", o.rounds},
                     {"waiters", o.waiters},
                     {"seed", o.seed},
                     {"t2_ms", t2_ms},
                     {"samples", r.samples_ms.size()},
                     {"not_started", r.not_started},
                     {"release_to_start_p50_ms", PercentileOf(r.samples_ms, 50)},
                     {"release_to_start_p99_ms", PercentileOf(r.samples_ms, 99)},
                     {"gpu_idle_while_waiting_s", r.idle_gpu_ms / 1000.0}};
  for (const auto& [kind, v] : r.by_kind) {
    out["release_to_start_p50_ms_" + kind] = PercentileOf(v, 50);
  }
  std::cout << out.dump() << "\n";
}

void PrintUtilizationText(const Options& o, const Result& r, int64_t t2_ms) {
  std::cout << "bench utilization: server and " << o.agents << " agents x " << o.gpus
            << " simulated GPUs as processes of "
            << (o.binary.empty() ? std::string("this binary") : o.binary)
            << " (server defaults, t2 "
            << FormatDurationMs(t2_ms) << "), " << o.rounds << " releases, "
            << o.waiters << " one-GPU waiters each, seed " << o.seed << "\n"
            << "  release -> start p50     " << PercentileOf(r.samples_ms, 50) << " ms\n"
            << "  release -> start p99     " << PercentileOf(r.samples_ms, 99) << " ms\n";
  for (const auto& [kind, v] : r.by_kind) {
    std::cout << "    " << kind << std::string(10 - std::min<size_t>(9, kind.size()), ' ')
              << "p50 " << PercentileOf(v, 50) << " ms, max "
              << *std::max_element(v.begin(), v.end()) << " ms\n";
  }
  std::cout << "  GPU idle while waiting   " << r.idle_gpu_ms / 1000.0 << " GPU-s over "
            << r.samples_ms.size() << " starts (" << r.not_started << " not started)\n";
}

void RunBenchUtilization(const Options& o, bool json) {
  CheckUtilizationOptions(o);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("gpusched-bench-util-" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  const std::string address = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  UtilCluster cluster;
  StartUtilCluster(o, dir, address, cluster);
  const core::SchedulerConfig sc;  // the server runs with its defaults
  const Result r = RunRounds(address, o);
  for (auto& a : cluster.agents) a->Kill(SIGTERM);
  cluster.server.Kill(SIGTERM);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (json) {
    PrintUtilizationJson(o, r, sc.t2_ms);
  } else {
    PrintUtilizationText(o, r, sc.t2_ms);
  }
  if (r.not_started > 0) ExitWith(kExitFailure);
}

}  // namespace

void RegisterBenchUtilization(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "utilization", "GPU idle after a release while tasks wait: release -> start (issue 37)");
  AddUtilizationFlags(cmd, *o, *json);
  cmd->callback([o, json] { RunBenchUtilization(*o, *json); });
}

}  // namespace gpusched::cli
