// `gpusched bench e2e [--executor process|noop] [--store sqlite|etcd] [--json]`: the whole
// control plane on loopback. 16 agents x 8 simulated GPUs in this process, a real server with
// its SQLite store (or a real 3-member etcd cluster, as the HA control plane stores its state),
// trivial tasks (one whole GPU each). With --executor process (the default) each task is a
// real process (/bin/true); with --executor noop the agents start nothing (a task "runs" for
// 1 ms), which measures the control plane alone. Reports tasks submitted -> finished per
// second (from the server's timestamps: first submission to last finish) and submit -> start
// latency (accepted -> agent reported running), and the process's CPU time per task
// (`cpu_ms_per_task`: clients, server and agents together; unlike tasks/s it does not depend
// on what else the machine runs). With real processes the same run also measures a bare
// spawn-and-wait loop of /bin/true (posix_spawn + waitpid, one loop per CPU
// core, no scheduler): `spawn_limit_per_s`, the most any process executor could reach here.
// The --clients submitters are closed-loop (one Submit in flight each, on a channel of its
// own), all driven by one thread. Both executors also measure bare round trips to the same
// server from as many such clients (GetServerStatus, which reads no scheduler state):
// `rpc_limit_per_s`, the transport's own limit here; a task costs one call and four messages
// on its agent's stream.
// With --tls the same run goes over TLS: certificates made in the run's temp dir (certs init),
// the server with --tls-dir, every agent presenting its own certificate (mutual TLS), the
// clients trusting the CA; run both to report the cost of TLS as a ratio. With --auth the
// server asks for bearer tokens (--auth token) and every client call carries the admin token
// its first start wrote: --tls --auth against neither is the cost of security.
// The server waits for capacity in Q (`capacity_wait: stay_queued`) unless --capacity-wait
// failure_queue: with PATENTS.md section 6's default a task that finds every GPU taken (the
// clients submit faster than 128 real processes finish) is parked in FQ for t2 = 30 s, and the
// run would measure t2 rather than the control plane.

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "base/percentile.h"
#include "base/thread_name.h"
#include "cli/certs.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/closed_loop_clients.h"
#include "cli/e2e_driver.h"
#include "cli/local_cluster.h"
#include "rpc/convert.h"
#include "store/local_etcd.h"

extern "C" char** environ;

namespace gpusched::cli {
namespace {

// `n` calls of `call(worker)` shared by `workers` threads, each named `name`: successful
// calls per second over the whole run. A call that returns false does not count.
double CallsPerSecond(int workers, int n, const char* name,
                      const std::function<bool(int worker)>& call) {
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      NameThisThread(name);
      while (next.fetch_add(1) < n) {
        if (!call(w)) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(n - failed.load()) / secs;
}

// Spawns and reaps /bin/true `n` times over one loop per CPU core; processes per second.
double SpawnLimitPerSecond(int n) {
  const int loops = std::max(1u, std::thread::hardware_concurrency());
  return CallsPerSecond(loops, n, "gs-bench-spawn", [](int) {
    char arg0[] = "true";
    char* argv[] = {arg0, nullptr};
    pid_t pid = 0;
    int status = 0;
    return posix_spawnp(&pid, "true", nullptr, nullptr, argv, environ) == 0 &&
           waitpid(pid, &status, 0) == pid;
  });
}

// CPU time (user + system) of this whole process so far, in ms.
double ProcessCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// The flags of `bench e2e`, with their defaults.
struct E2eFlags {
  bool json = false;
  int tasks = 3000;
  int agents = 16;
  int clients = 16;
  std::string store = "sqlite";
  bool tls = false;
  bool auth = false;
  std::string executor = "process";
  std::string capacity_wait = "stay_queued";
  std::string sqlite_sync = "full";
};

// What one run measured.
struct E2eResult {
  int errors = 0;             // submissions not answered OK
  int64_t finished = 0;       // tasks that succeeded
  double cpu_ms = 0;          // this process's CPU time over the run
  double secs = 0;            // first submission to last finish, server-stamped
  double p50 = 0, p99 = 0;    // submit -> start latency, ms
  double rpc_limit = 0;       // bare round trips per second
  double spawn_limit = 0;     // processes per second (process executor only)
};

void AddE2eFlags(CLI::App* cmd, E2eFlags& f) {
  cmd->add_flag("--json", f.json, "Print one JSON object");
  cmd->add_option("--tasks", f.tasks, "Tasks to run")->capture_default_str();
  cmd->add_option("--agents", f.agents, "Agents of 8 simulated GPUs")->capture_default_str();
  cmd->add_option("--clients", f.clients, "Concurrent submitting clients")->capture_default_str();
  cmd->add_option("--executor", f.executor,
                  "process (each task a real /bin/true) or noop (agents start nothing: the "
                  "control plane alone)")
      ->capture_default_str();
  cmd->add_option("--capacity-wait", f.capacity_wait,
                  "stay_queued (a task no GPU is free for waits in Q and starts on the next "
                  "release) or failure_queue (the server's default: parked in FQ for t2)")
      ->capture_default_str();
  cmd->add_option("--store", f.store, "sqlite, or etcd (a 3-member etcd cluster on loopback)")
      ->capture_default_str();
  cmd->add_option("--sqlite-sync", f.sqlite_sync,
                  "full (the server's default: every commit synced, survives power loss) or "
                  "normal (synced at checkpoints: survives a crash of the process only)")
      ->capture_default_str();
  cmd->add_flag("--tls", f.tls,
                "TLS on every connection (server, agents with client certificates, clients), "
                "certificates made in a temp dir");
  cmd->add_flag("--auth", f.auth,
                "Bearer tokens: the server runs with --auth token and every call carries a token");
}

// The checks that need no cluster (--store is checked when the store is chosen); returns the
// executor.
agent::ExecutorKind CheckE2eFlags(const E2eFlags& f) {
  if (f.tasks < 1 || f.agents < 1 || f.clients < 1) {
    Fail(InvalidArgument("--tasks, --agents and --clients must be >= 1"));
  }
  auto kind = agent::ParseExecutorKind(f.executor);
  if (!kind.ok()) Fail(kind.status());
  if (f.capacity_wait != "stay_queued" && f.capacity_wait != "failure_queue") {
    Fail(InvalidArgument("--capacity-wait: \"" + f.capacity_wait +
                         "\" (use stay_queued or failure_queue)"));
  }
  if (f.sqlite_sync != "full" && f.sqlite_sync != "normal") {
    Fail(InvalidArgument("--sqlite-sync: \"" + f.sqlite_sync + "\" (use full or normal)"));
  }
  return *kind;
}

LocalClusterOptions E2eClusterOptions(const E2eFlags& f, agent::ExecutorKind kind,
                                      const std::string& dir) {
  LocalClusterOptions o;
  o.server.listen = "127.0.0.1:0";
  o.server.data_dir = dir;
  o.server.fsync_every_commit = f.sqlite_sync == "full";
  o.agents = f.agents;
  o.gpus = "8x80GiB";
  o.quiet_agents = true;
  o.executor = kind;
  o.server.scheduler.capacity_wait = f.capacity_wait == "stay_queued"
                                         ? core::CapacityWait::kStayQueued
                                         : core::CapacityWait::kFailureQueue;
  return o;
}

// --tls: certificates in DIR/tls for the server and every agent; the clients' TLS.
rpc::ClientTls MakeE2eCerts(int agents, const std::string& dir, LocalClusterOptions& o) {
  CertsRequest certs;
  certs.dir = dir + "/tls";
  for (int i = 1; i <= agents; ++i) certs.agents.push_back("dev-" + std::to_string(i));
  if (auto made = InitCerts(certs); !made.ok()) Fail(made.status());
  o.server.tls_dir = certs.dir;
  auto loaded = rpc::LoadClientTls(certs.dir + "/ca/ca.crt");
  if (!loaded.ok()) Fail(loaded.status());
  return std::move(loaded).value();
}

// --store etcd: a 3-member etcd cluster in DIR/etcd that the server stores in (null for
// sqlite; another name fails).
std::unique_ptr<store::LocalEtcd> StartE2eStore(const std::string& store, const std::string& dir,
                                                LocalClusterOptions& o) {
  if (store != "etcd") {
    if (store != "sqlite") Fail(InvalidArgument("--store: \"" + store + "\" (use sqlite or etcd)"));
    return nullptr;
  }
  store::LocalEtcd::Options eo;
  eo.dir = dir + "/etcd";
  auto e = store::LocalEtcd::Start(eo);
  if (!e.ok()) Fail(e.status());
  std::unique_ptr<store::LocalEtcd> etcd = std::move(e).value();
  o.server.store = "etcd";
  o.server.etcd = etcd->client_urls();
  return etcd;
}

// --auth: the admin token the first start of a server with authentication writes ("" without).
std::string E2eAdminToken(bool auth, const std::string& dir) {
  std::string token;
  if (auth) {
    std::ifstream in(dir + "/admin-token");
    if (!std::getline(in, token) || token.empty()) {
      Fail(FailedPrecondition("bench e2e --auth: the server wrote no " + dir + "/admin-token"));
    }
  }
  return token;
}

// `tasks` one-GPU tasks from the closed-loop `submitters`; the submissions that failed.
int SubmitE2eTasks(std::vector<std::unique_ptr<E2eDriver>>& submitters, int tasks,
                   agent::ExecutorKind kind) {
  core::TaskSpec spec;
  spec.gpus = 1;
  spec.command = {"true"};
  // noop: the task "runs" 1 ms; process: the expected run time only weighs its priority
  spec.duration_ms = kind == agent::ExecutorKind::kNoop ? 1 : 1000;
  ::gpusched::v1::SubmitRequest request;
  rpc::TaskSpecToProto(spec, request.mutable_spec());
  // Issue 40: what `gpusched submit` sends, an idempotency key per submission (the server
  // reads it in its store and records it with the task).
  const std::string key_prefix = "bench-e2e-" + std::to_string(getpid()) + "-";
  std::atomic<int64_t> next_key{0};
  return RunClosedLoopClients<::gpusched::v1::SubmitResponse>(
      submitters, tasks, "gs-bench-client",
      [&](E2eDriver& d, grpc::ClientContext& ctx, grpc::CompletionQueue& cq) {
        ::gpusched::v1::SubmitRequest keyed = request;  // serialized by the call's start
        keyed.set_idempotency_key(key_prefix + std::to_string(next_key++));
        return d.StartSubmit(ctx, keyed, cq);
      });
}

// Done when no task is live (or after 5 minutes from `t0`). Each poll asks for one task of
// each live state (served from the server's memory): listing them all, or the finished ones
// from the store, would be work of the bench's own, done under the control plane's lock and
// counted in cpu_ms_per_task (listing every live task took 8 % of the run's CPU).
void WaitUntilNoTaskLive(E2eDriver& probe, std::chrono::steady_clock::time_point t0) {
  for (;;) {
    bool live = false;
    bool listed = true;
    for (const char* state : {"pending", "preempted", "assigned", "running"}) {
      auto any = probe.AnyIn(state);
      listed = listed && any.ok();
      live = live || (any.ok() && *any);
    }
    if (listed && !live) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::minutes(5)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll period
  }
}

// From the server's records: the tasks that succeeded, the run's length from `t0_ms` to the
// last finish as the server stamped them (the poll period does not count), and the submit ->
// start latency percentiles.
void TallyE2eTasks(E2eDriver& probe, int64_t t0_ms, E2eResult& r) {
  auto all = probe.List();
  std::vector<double> latency;
  int64_t last_finish_ms = t0_ms;
  if (all.ok()) {
    for (const auto& t : *all) {
      if (t.state() == "succeeded") {
        ++r.finished;
        last_finish_ms = std::max(last_finish_ms, t.finished_ms());
      }
      if (t.started_ms() > 0) latency.push_back(double(t.started_ms() - t.submitted_ms()));
    }
  }
  r.secs = std::max<int64_t>(last_finish_ms - t0_ms, 1) / 1000.0;
  r.p50 = PercentileOf(latency, 50);
  r.p99 = PercentileOf(latency, 99);
}

void PrintE2eJson(const E2eFlags& f, const E2eResult& r, bool noop) {
  const double rate = double(r.finished) / r.secs;
  nlohmann::json out{{"executor", f.executor},
                     {"store", f.store},
                     {"sqlite_synchronous", f.sqlite_sync},
                     {"capacity_wait", f.capacity_wait},
                     {"tls", f.tls},
                     {"auth", f.auth},
                     {"agents", f.agents},
                     {"gpus", f.agents * 8},
                     {"tasks", r.finished},
                     {"tasks_per_s", rate},
                     {"submit_to_start_p50_ms", r.p50},
                     {"submit_to_start_p99_ms", r.p99},
                     {"submit_errors", r.errors},
                     {"cpu_ms_per_task", r.finished > 0 ? r.cpu_ms / double(r.finished) : 0.0},
                     {"rpc_limit_per_s", r.rpc_limit},
                     {"seconds", r.secs}};
  if (!noop) out["spawn_limit_per_s"] = r.spawn_limit;
  std::cout << out.dump() << "\n";
}

void PrintE2eText(const E2eFlags& f, const E2eResult& r, bool noop) {
  std::cout << "bench e2e: " << f.store << " store"
            << (f.store == "sqlite" ? " (synchronous " + f.sqlite_sync + ")" : "")
            << (f.tls ? ", TLS" : "")
            << (f.auth ? ", tokens" : "") << ", capacity_wait " << f.capacity_wait << ", "
            << f.agents << " agents x 8 simulated GPUs, "
            << r.finished << "/" << f.tasks << " tasks ("
            << (noop ? "noop executor" : "/bin/true") << ", 1 GPU each) in " << r.secs
            << " s\n"
            << "  throughput            " << double(r.finished) / r.secs
            << " tasks/s (submitted -> finished)\n"
            << "  submit -> start p50   " << r.p50 << " ms\n"
            << "  submit -> start p99   " << r.p99 << " ms\n"
            << "  CPU per task          "
            << (r.finished > 0 ? r.cpu_ms / double(r.finished) : 0.0)
            << " ms (clients, server and agents: all in this process)\n"
            << "  bare round trips      " << r.rpc_limit
            << " calls/s (GetServerStatus, same clients and server, same run)\n";
  if (!noop) {
    std::cout << "  spawn-and-wait limit  " << r.spawn_limit
              << " processes/s (/bin/true, no scheduler, same run)\n";
  }
}

// The tasks through the cluster at `address`, then the transport's limit on the same server.
E2eResult MeasureE2e(const E2eFlags& f, agent::ExecutorKind kind, const std::string& address,
                     const rpc::ClientTls& client_tls, const std::string& token) {
  E2eDriver probe(address, &client_tls, token);
  Status ready = probe.WaitForNodes(f.agents, 60'000);
  if (!ready.ok()) Fail(ready);
  std::vector<std::unique_ptr<E2eDriver>> submitters =
      Clients(f.clients, address, &client_tls, token);
  E2eResult r;
  const double cpu0_ms = ProcessCpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  r.errors = SubmitE2eTasks(submitters, f.tasks, kind);
  WaitUntilNoTaskLive(probe, t0);
  // Clients, server and agents all run in this process: its CPU time over the run, per
  // task, is what one task costs the whole control plane (the last polls included).
  r.cpu_ms = ProcessCpuMs() - cpu0_ms;
  TallyE2eTasks(probe, t0_ms, r);
  // The transport's limit, measured on the same server once the tasks are done.
  r.rpc_limit = RpcLimitPerSecond(address, &client_tls, token, f.clients,
                                  std::min(f.tasks, 20'000));
  return r;
}

void RunBenchE2e(const E2eFlags& f) {
  const agent::ExecutorKind kind = CheckE2eFlags(f);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("gpusched-bench-e2e-" + std::to_string(getpid())))
                              .string();
  LocalClusterOptions o = E2eClusterOptions(f, kind, dir);
  rpc::ClientTls client_tls;
  if (f.tls) client_tls = MakeE2eCerts(f.agents, dir, o);
  if (f.auth) o.server.auth = "token";
  std::unique_ptr<store::LocalEtcd> etcd = StartE2eStore(f.store, dir, o);
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) Fail(cluster.status());
  const std::string token = E2eAdminToken(f.auth, dir);
  E2eResult r = MeasureE2e(f, kind, (*cluster)->address(), client_tls, token);
  (*cluster)->Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  const bool noop = kind == agent::ExecutorKind::kNoop;
  // The same run's bare process limit, after the cluster is gone (nothing else running).
  r.spawn_limit = noop ? 0 : SpawnLimitPerSecond(std::min(f.tasks, 2000));
  if (f.json) {
    PrintE2eJson(f, r, noop);
  } else {
    PrintE2eText(f, r, noop);
  }
  if (r.finished < f.tasks) ExitWith(kExitFailure);
}

}  // namespace

void RegisterBenchE2e(CLI::App& bench) {
  auto f = std::make_shared<E2eFlags>();
  CLI::App* cmd = bench.add_subcommand("e2e", "Control plane end to end: tasks per second");
  AddE2eFlags(cmd, *f);
  cmd->callback([f] { RunBenchE2e(*f); });
}

}  // namespace gpusched::cli
