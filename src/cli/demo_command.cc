// `gpusched demo` (`./run demo`): a local cluster (server + SQLite + 2 agents with simulated
// GPUs), a mixed workload (whole-GPU tasks, tasks sharing a GPU by memory, one task that
// always fails and is retried with demotion until FAIL_MAX), live progress, and a summary.

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <thread>

#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "cli/local_cluster.h"
#include "cli/output.h"

namespace gpusched::cli {
namespace {

struct DemoTask {
  std::string name;
  int64_t gpus;
  MiB gpu_mem_mib;
  std::vector<std::string> command;
  std::optional<int64_t> retries;
};

std::vector<DemoTask> Workload() {
  const std::string show = "echo \"$GPUSCHED_NODE gpus=$CUDA_VISIBLE_DEVICES mem=$GPUSCHED_GPU_MEM_MIB\"";
  std::vector<DemoTask> w;
  for (int i = 1; i <= 4; ++i) {  // whole GPUs: exclusive
    w.push_back({"train-" + std::to_string(i), 2, 0,
                 {"sh", "-c", show + "; sleep 2"}, std::nullopt});
  }
  for (int i = 1; i <= 6; ++i) {  // 6 GiB shares: two per 16 GiB GPU
    w.push_back({"infer-" + std::to_string(i), 1, 6 * 1024,
                 {"sh", "-c", show + "; sleep 1"}, std::nullopt});
  }
  w.push_back({"flaky", 1, 2 * 1024, {"sh", "-c", "echo failing on purpose >&2; exit 3"}, 2});
  return w;
}

LocalClusterOptions DemoClusterOptions(int agents, const std::string& dir) {
  LocalClusterOptions o;
  o.server.listen = "127.0.0.1:0";
  o.server.http = "127.0.0.1:0";
  o.server.data_dir = dir;
  o.server.scheduler.t1_ms = 1000;
  o.server.scheduler.t2_ms = 1000;  // retries come back quickly in a demo
  o.server.node_heartbeat_ms = 500;
  o.server.task_heartbeat_ms = 1000;
  o.agents = agents;
  o.gpus = "4x16GiB";
  o.quiet_agents = true;
  return o;
}

// Submits the workload, one line per task.
void SubmitWorkload(E2eDriver& d) {
  for (const DemoTask& t : Workload()) {
    core::TaskSpec s;
    s.name = t.name;
    s.gpus = t.gpus;
    s.gpu_mem_mib = t.gpu_mem_mib;
    s.command = t.command;
    s.max_retries = t.retries;
    auto id = d.Submit(s);
    if (!id.ok()) Fail(id.status());
    std::cout << "  " << std::setw(3) << *id << "  " << std::left << std::setw(8) << t.name
              << std::right << "  "
              << (t.gpu_mem_mib ? "1 GPU share of " + FormatSizeMiB(t.gpu_mem_mib)
                                : std::to_string(t.gpus) + " whole GPUs")
              << (t.retries ? ", exits 3, retries " + std::to_string(*t.retries) : "") << "\n";
  }
}

// Prints the counts by state every 0.5 s from `t0` until no task waits or runs (or 120 s
// passed); the last counts.
std::map<std::string, int64_t> ShowProgress(E2eDriver& d,
                                            std::chrono::steady_clock::time_point t0) {
  std::map<std::string, int64_t> counts;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // progress period
    auto c = d.CountByState();
    if (!c.ok()) Fail(c.status());
    counts = *c;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "  " << std::fixed << std::setprecision(1) << std::setw(5) << t << "s  ";
    for (const char* s : {"pending", "assigned", "running", "succeeded", "failed"}) {
      std::cout << s << " " << counts[s] << "  ";
    }
    std::cout << "\n" << std::flush;
    if (counts["pending"] + counts["assigned"] + counts["running"] == 0 || t > 120) break;
  }
  return counts;
}

void PrintSummary(const std::vector<v1::Task>& tasks) {
  std::cout << "\nsummary:\n";
  std::vector<std::vector<std::string>> rows{
      {"ID", "NAME", "STATE", "NODE", "GPUS", "EXIT", "ATTEMPTS", "RAN", "REASON"}};
  for (const auto& t : tasks) {
    rows.push_back({std::to_string(t.id()), t.name(), t.state(), t.node(), JoinInts(t.gpus()),
                    t.has_exit_code() ? std::to_string(t.exit_code()) : "-",
                    std::to_string(t.attempts()),
                    t.finished_ms() && t.started_ms()
                        ? FormatDurationMs(t.finished_ms() - t.started_ms())
                        : "-",
                    t.reason()});
  }
  PrintTable(std::cout, rows);
}

void RunDemo(int agents) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("gpusched-demo-" + std::to_string(getpid())))
                              .string();
  const LocalClusterOptions o = DemoClusterOptions(agents, dir);
  std::cout << "gpusched demo: server + SQLite (" << dir << ") + " << agents
            << " agents x 4 simulated 16 GiB GPUs\n";
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) Fail(cluster.status());
  E2eDriver d((*cluster)->address());
  if (Status s = d.WaitForNodes(agents, 60'000); !s.ok()) Fail(s);
  std::cout << "  server " << (*cluster)->address() << ", metrics http://127.0.0.1:"
            << (*cluster)->http_port() << "/metrics\n"
            << "  dashboard http://127.0.0.1:" << (*cluster)->http_port()
            << "/ (while the demo runs)\n\nsubmitting:\n";
  SubmitWorkload(d);
  std::cout << "\nprogress:\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, int64_t> counts = ShowProgress(d, t0);
  auto tasks = d.List();
  if (!tasks.ok()) Fail(tasks.status());
  PrintSummary(*tasks);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n" << counts["succeeded"] << " succeeded, " << counts["failed"]
            << " failed (the flaky task, after its retries), " << tasks->size()
            << " tasks in " << std::setprecision(1) << wall << " s\n";
  std::cout << "\nTo watch a cluster in the browser: gpusched dev, then open its dashboard at "
               "http://127.0.0.1:7071/ (REST API: /api/v1, described at /api/v1/openapi.json)\n";
  (*cluster)->Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  const bool expected = counts["succeeded"] == static_cast<int64_t>(tasks->size()) - 1 &&
                        counts["failed"] == 1;
  if (!expected) {
    std::cout << "demo: unexpected outcome\n";
    ExitWith(kExitFailure);
  }
}

}  // namespace

void RegisterDemo(CLI::App& app) {
  auto agents = std::make_shared<int>(2);
  CLI::App* cmd = app.add_subcommand("demo", "Run a local cluster and a mixed workload");
  cmd->add_option("--agents", *agents, "Agents (4 x 16GiB simulated GPUs each)")
      ->capture_default_str();
  cmd->callback([agents] { RunDemo(*agents); });
}

}  // namespace gpusched::cli
