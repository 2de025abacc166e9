// `gpusched bench scale --agents N[,N...] [--tasks T] [--json]` (issue 43): one real server
// (`gpusched server`, a child process with its SQLite store) and N simulated agents
// (cli/sim_agent_fleet.h: the AgentLink protocol over gRPC, a connection each, noop tasks on
// 8 simulated GPUs) in this process, every agent heartbeating on the server's default period.
// For each N in turn:
//   1. connect: the time until the server lists all N nodes as connected and reachable;
//   2. idle: --idle-seconds of heartbeats alone. The server's CPU time (user + system, from
//      /proc) over the window divided by the node heartbeats sent in it is
//      `server_cpu_us_per_heartbeat`: everything the server did meanwhile (probes of every
//      node, liveness) counted against the heartbeats;
//   3. load: --tasks one-GPU tasks of --task-ms from --clients closed-loop clients. Submit ->
//      start p50/p99 from the server's own timestamps; pass time p50/p99 from the server's
//      histogram of pass durations (gpusched_decision_latency_seconds over the load, read
//      from /metrics before and after, quantiles interpolated in its buckets as Prometheus'
//      histogram_quantile does); heartbeat -> state lag p50/p99 as the fleet measures it
//      (a FINISHED on an agent's stream to the server's acknowledgement, sent once the exit
//      is committed; heartbeats go through the same stream and inbox ahead of it);
//   4. the server's RSS without agents, with N connected, and after the load.
// The transport's own limit on the same server (bare GetServerStatus round trips from as many
// clients) is measured last: `rpc_limit_per_s`, and the server's CPU per such call
// (`rpc_server_cpu_us_per_call`, the agents still heartbeating), the floor of what any message
// costs it.

#include <unistd.h>

#include <csignal>
#include <cmath>
#include <limits>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/percentile.h"
#include "cli/child_process.h"
#include "cli/closed_loop_clients.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "cli/bench_scale.h"
#include "cli/sim_agent_fleet.h"
#include "cli/usage_errors.h"
#include "rpc/convert.h"

namespace gpusched::cli::scale {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

void AddScaleFlags(CLI::App* cmd, ScaleFlags& f) {
  cmd->add_flag("--json", f.json, "Print one JSON object per agent count");
  cmd->add_option("--agents", f.agents, "Simulated agents of 8 GPUs; a list runs each in turn")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tasks", f.tasks, "One-GPU noop tasks submitted under load (0 = none)")
      ->capture_default_str();
  cmd->add_option("--task-ms", f.task_ms, "How long each task runs (noop)")->capture_default_str();
  cmd->add_option("--clients", f.clients, "Closed-loop submitting clients")->capture_default_str();
  cmd->add_option("--idle-seconds", f.idle_seconds,
                  "Window of heartbeats alone for the server's CPU per heartbeat")
      ->capture_default_str();
  cmd->add_option("--threads", f.threads, "Threads driving the simulated agents")
      ->capture_default_str();
  cmd->add_option("--pending", f.pending,
                  "Instead: a server holding this many pending tasks (fill every GPU, queue them, "
                  "measure, restart, drain)")
      ->capture_default_str();
  cmd->add_option("--capacity-wait", f.capacity_wait,
                  "failure_queue (the server's default: a task no GPU is free for waits in FQ, "
                  "re-evaluated on each release) or stay_queued (it stays in Q: every pass visits it)")
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "Seed of the agents' heartbeat offsets")->capture_default_str();
}

void CheckScaleFlags(const ScaleFlags& f) {
  for (int n : f.agents) {
    if (n < 1 || n > 20'000) {
      Fail(InvalidArgument("--agents: " + std::to_string(n) + " (use 1 to 20000)"));
    }
  }
  if (f.pending < 0 || f.pending > 10'000'000) {
    Fail(InvalidArgument("--pending: " + std::to_string(f.pending) + " (use 0 to 10000000)"));
  }
  if (f.capacity_wait != "failure_queue" && f.capacity_wait != "stay_queued") {
    Fail(InvalidArgument("--capacity-wait: \"" + f.capacity_wait +
                         "\" (use failure_queue or stay_queued)"));
  }
  if (f.tasks < 0) Fail(InvalidArgument("--tasks: " + std::to_string(f.tasks) + " (use >= 0)"));
  if (f.task_ms < 0) Fail(InvalidArgument("--task-ms: " + std::to_string(f.task_ms) + " (use >= 0)"));
  if (f.clients < 1) Fail(InvalidArgument("--clients: " + std::to_string(f.clients) + " (use >= 1)"));
  if (f.idle_seconds < 1) {
    Fail(InvalidArgument("--idle-seconds: " + std::to_string(f.idle_seconds) + " (use >= 1)"));
  }
  if (f.threads < 1 || f.threads > 64) {
    Fail(InvalidArgument("--threads: " + std::to_string(f.threads) + " (use 1 to 64)"));
  }
}

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt (fields 3-13)
  double utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return (utime + stime) / double(sysconf(_SC_CLK_TCK));
}

std::vector<std::pair<double, double>> HistogramBuckets(const std::string& text,
                                                        const std::string& name) {
  std::vector<std::pair<double, double>> out;
  std::istringstream lines(text);
  const std::string prefix = name + "_bucket{le=\"";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t close = line.find('"', prefix.size());
    const std::string le = line.substr(prefix.size(), close - prefix.size());
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
    out.emplace_back(bound, std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return out;
}

double HistogramQuantileMs(const std::vector<std::pair<double, double>>& before,
                           const std::vector<std::pair<double, double>>& after, double q) {
  if (after.empty() || before.size() != after.size()) return 0;
  const double total = after.back().second - before.back().second;
  if (total <= 0) return 0;
  double lower = 0, below = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const double count = after[i].second - before[i].second;
    if (count >= q * total) {
      const double upper = std::isinf(after[i].first) ? lower : after[i].first;
      const double in_bucket = count - below;
      const double frac = in_bucket > 0 ? (q * total - below) / in_bucket : 1;
      return 1e3 * (lower + (upper - lower) * frac);
    }
    lower = after[i].first;
    below = count;
  }
  return 1e3 * lower;
}


void StartScaleServer(const std::string& dir, const ScaleFlags& f, ScaleServer& s) {
  fs::create_directories(dir);
  // The heartbeat periods are the defaults.
  std::ofstream(dir + "/server.yaml") << "capacity_wait: " << f.capacity_wait << "\n";
  const int port = FreeLoopbackPort();
  s.http_port = FreeLoopbackPort();
  s.address = "127.0.0.1:" + std::to_string(port);
  const Status started = s.proc.Start({"server", "--listen", s.address, "--http",
                                       "127.0.0.1:" + std::to_string(s.http_port), "--data-dir",
                                       dir + "/data", "--config", dir + "/server.yaml"},
                                      dir + "/server.log");
  if (!started.ok()) Fail(started);
  E2eDriver probe(s.address);
  // A restart reloads every live task first: 50 s for a million here (issue 43).
  const auto limit = std::chrono::seconds(60 + f.pending / 5'000);
  const auto deadline = SteadyClock::now() + limit;
  while (!probe.Ping().ok()) {
    if (SteadyClock::now() > deadline) {
      Fail(Unavailable("bench scale: the server did not answer within " +
                       std::to_string(limit.count()) + " s; see " + dir +
                       "/server.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Nodes the server lists as connected and reachable. ListNodes of 10,000 nodes is larger than
// gRPC's default 4 MiB message: this channel takes up to 256 MiB.
int ReadyNodes(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  auto stub = ::gpusched::v1::Scheduler::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ::gpusched::v1::ListNodesResponse resp;
  if (!stub->ListNodes(&ctx, {}, &resp).ok()) return -1;
  int ready = 0;
  for (const auto& node : resp.nodes()) ready += node.connected() && node.available();
  return ready;
}

// ReadyNodes until `agents` are ready: the seconds that took from `t0`. Fails after a
// deadline that grows with the fleet.
double WaitForReadyNodes(const std::string& address, int agents, SteadyClock::time_point t0) {
  const auto deadline = t0 + std::chrono::seconds(120 + agents / 50);
  int ready = 0;
  while ((ready = ReadyNodes(address)) < agents) {
    if (SteadyClock::now() > deadline) {
      Fail(Unavailable("bench scale: " + std::to_string(std::max(ready, 0)) + " of " +
                       std::to_string(agents) + " agents connected and reachable in time"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

std::unique_ptr<SimAgentFleet> StartFleet(const ScaleFlags& f, const std::string& address,
                                          int agents, double* ready_seconds) {
  SimFleetOptions o;
  o.server = address;
  o.agents = agents;
  o.threads = f.threads;
  o.seed = f.seed;
  const auto t0 = SteadyClock::now();
  std::unique_ptr<SimAgentFleet> fleet = OrFail(SimAgentFleet::Start(o));
  *ready_seconds = WaitForReadyNodes(address, agents, t0);
  return fleet;
}

void PrintScaleText(const nlohmann::ordered_json& j) {
  std::cout << "bench scale: " << j["agents"] << " simulated agents x 8 GPUs, one server\n";
  for (const auto& [key, value] : j.items()) {
    if (key == "agents") continue;
    std::cout << "  " << key << std::string(key.size() < 30 ? 30 - key.size() : 1, ' ') << value
              << "\n";
  }
}

namespace {

// What one agent count measured.
struct ScaleResult {
  int agents = 0;
  double connect_s = 0;
  int64_t rss_empty_kib = 0, rss_idle_kib = 0, rss_loaded_kib = 0;
  int64_t idle_heartbeats = 0;
  double idle_cpu_s = 0, idle_wall_s = 0;
  int64_t tasks_started = 0;
  int submit_errors = 0;
  double load_s = 0, load_cpu_s = 0;
  double start_p50_ms = 0, start_p99_ms = 0;
  double pass_p50_ms = 0, pass_p99_ms = 0;
  double lag_p50_ms = 0, lag_p99_ms = 0;
  int64_t lag_samples = 0;
  int64_t streams_ended = 0;
  double rpc_limit = 0;
  double rpc_cpu_us = 0;  // the server's CPU per bare round trip (heartbeats still going)
};

constexpr int kRpcCalls = 20'000;

void MeasureIdle(const ScaleFlags& f, ScaleServer& server, SimAgentFleet& fleet, ScaleResult& r) {
  const double cpu0 = ProcessCpuSeconds(server.proc.pid());
  const int64_t hb0 = fleet.Counters().heartbeats;
  const auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::seconds(f.idle_seconds));
  r.idle_cpu_s = ProcessCpuSeconds(server.proc.pid()) - cpu0;
  r.idle_heartbeats = fleet.Counters().heartbeats - hb0;
  r.idle_wall_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  r.rss_idle_kib = ResidentKib(server.proc.pid());
}

// Submits the tasks, waits until none is live; submit -> start from the server's records.
void SubmitAndDrain(const ScaleFlags& f, ScaleServer& server, ScaleResult& r) {
  core::TaskSpec spec;
  spec.gpus = 1;
  spec.command = {"true"};
  spec.duration_ms = f.task_ms;
  ::gpusched::v1::SubmitRequest request;
  rpc::TaskSpecToProto(spec, request.mutable_spec());
  std::vector<std::unique_ptr<E2eDriver>> clients = Clients(f.clients, server.address, nullptr, "");
  r.submit_errors = RunClosedLoopClients<::gpusched::v1::SubmitResponse>(
      clients, f.tasks, "gs-bench-client",
      [&](E2eDriver& d, grpc::ClientContext& ctx, grpc::CompletionQueue& cq) {
        return d.StartSubmit(ctx, request, cq);
      });
  E2eDriver probe(server.address);
  const auto deadline = SteadyClock::now() + std::chrono::minutes(10);
  for (bool live = true; live && SteadyClock::now() < deadline;) {
    live = false;
    for (const char* state : {"pending", "assigned", "running"}) {
      auto any = probe.AnyIn(state);
      live = live || !any.ok() || *any;
    }
    if (live) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<double> latency;
  if (auto all = probe.List(); all.ok()) {
    for (const auto& t : *all) {
      if (t.started_ms() > 0) latency.push_back(double(t.started_ms() - t.submitted_ms()));
    }
  }
  r.tasks_started = int64_t(latency.size());
  r.start_p50_ms = PercentileOf(latency, 50);
  r.start_p99_ms = PercentileOf(latency, 99);
}

void MeasureLoad(const ScaleFlags& f, ScaleServer& server, SimAgentFleet& fleet, ScaleResult& r) {
  const std::string histogram = "gpusched_decision_latency_seconds";
  const auto before = HistogramBuckets(HttpGetLoopback(server.http_port, "/metrics"), histogram);
  (void)fleet.TakeAckLags();
  const double cpu0 = ProcessCpuSeconds(server.proc.pid());
  const auto t0 = SteadyClock::now();
  if (f.tasks > 0) SubmitAndDrain(f, server, r);
  r.load_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  r.load_cpu_s = ProcessCpuSeconds(server.proc.pid()) - cpu0;
  const auto after = HistogramBuckets(HttpGetLoopback(server.http_port, "/metrics"), histogram);
  r.pass_p50_ms = HistogramQuantileMs(before, after, 0.50);
  r.pass_p99_ms = HistogramQuantileMs(before, after, 0.99);
  const std::vector<double> lags = fleet.TakeAckLags();
  r.lag_samples = int64_t(lags.size());
  r.lag_p50_ms = PercentileOf(lags, 50);
  r.lag_p99_ms = PercentileOf(lags, 99);
  r.rss_loaded_kib = ResidentKib(server.proc.pid());
}

ScaleResult RunOneScale(const ScaleFlags& f, int agents) {
  const std::string dir = (fs::temp_directory_path() / ("gpusched-bench-scale-" +
                                                       std::to_string(getpid()) + "-" +
                                                       std::to_string(agents)))
                              .string();
  ScaleResult r;
  r.agents = agents;
  {
    ScaleServer server;
    StartScaleServer(dir, f, server);
    r.rss_empty_kib = ResidentKib(server.proc.pid());
    std::unique_ptr<SimAgentFleet> fleet = StartFleet(f, server.address, agents, &r.connect_s);
    MeasureIdle(f, server, *fleet, r);
    MeasureLoad(f, server, *fleet, r);
    r.streams_ended = fleet->Counters().streams_ended;
    const double cpu0 = ProcessCpuSeconds(server.proc.pid());
    r.rpc_limit = RpcLimitPerSecond(server.address, nullptr, "", f.clients, kRpcCalls);
    r.rpc_cpu_us = 1e6 * (ProcessCpuSeconds(server.proc.pid()) - cpu0) / kRpcCalls;
    fleet->Stop();
    server.proc.Kill(SIGTERM);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

nlohmann::ordered_json ScaleJson(const ScaleFlags& f, const ScaleResult& r) {
  const auto mib = [](int64_t kib) { return double(kib) / 1024.0; };
  return {{"agents", r.agents},
          {"gpus", r.agents * 8},
          {"seed", f.seed},
          {"connect_seconds", r.connect_s},
          {"heartbeats_per_s", double(r.idle_heartbeats) / r.idle_wall_s},
          {"server_cpu_us_per_heartbeat",
           r.idle_heartbeats > 0 ? 1e6 * r.idle_cpu_s / double(r.idle_heartbeats) : 0.0},
          {"server_cpu_percent_idle", 100.0 * r.idle_cpu_s / r.idle_wall_s},
          {"server_rss_mib_no_agents", mib(r.rss_empty_kib)},
          {"server_rss_mib", mib(r.rss_idle_kib)},
          {"server_rss_mib_after_load", mib(r.rss_loaded_kib)},
          {"server_kib_per_agent", double(r.rss_idle_kib - r.rss_empty_kib) / r.agents},
          {"tasks", f.tasks},
          {"tasks_started", r.tasks_started},
          {"submit_errors", r.submit_errors},
          {"load_seconds", r.load_s},
          {"server_cpu_percent_load", 100.0 * r.load_cpu_s / std::max(r.load_s, 1e-9)},
          {"submit_to_start_p50_ms", r.start_p50_ms},
          {"submit_to_start_p99_ms", r.start_p99_ms},
          {"pass_p50_ms", r.pass_p50_ms},
          {"pass_p99_ms", r.pass_p99_ms},
          {"heartbeat_to_state_p50_ms", r.lag_p50_ms},
          {"heartbeat_to_state_p99_ms", r.lag_p99_ms},
          {"heartbeat_to_state_samples", r.lag_samples},
          {"streams_ended", r.streams_ended},
          {"rpc_limit_per_s", r.rpc_limit},
          {"rpc_server_cpu_us_per_call", r.rpc_cpu_us}};
}

void RunBenchScale(const ScaleFlags& f) {
  CheckScaleFlags(f);
  bool complete = true;
  for (int agents : f.agents) {
    if (f.pending > 0) {
      const nlohmann::ordered_json j = RunPendingScale(f, agents);
      f.json ? void(std::cout << j.dump() << std::endl) : PrintScaleText(j);
      continue;
    }
    const ScaleResult r = RunOneScale(f, agents);
    const nlohmann::ordered_json j = ScaleJson(f, r);
    if (f.json) {
      std::cout << j.dump() << std::endl;
    } else {
      PrintScaleText(j);
    }
    complete = complete && r.tasks_started == f.tasks && r.submit_errors == 0;
  }
  if (!complete) ExitWith(kExitFailure);
}

}  // namespace
}  // namespace gpusched::cli::scale

namespace gpusched::cli {

void RegisterBenchScale(CLI::App& bench) {
  using scale::ScaleFlags;
  auto f = std::make_shared<ScaleFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "scale", "Many agents, one server: CPU per heartbeat, RSS, pass time, latencies");
  scale::AddScaleFlags(cmd, *f);
  cmd->callback([f] { scale::RunBenchScale(*f); });
}

}  // namespace gpusched::cli
