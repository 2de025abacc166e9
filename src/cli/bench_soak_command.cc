// `gpusched bench soak [--tasks N] [--json]`: noop tasks through the real server (its own
// process, SQLite store in a temporary folder) and real agents (`--executor noop`, their own
// processes). Shows that the server's resident memory stops growing with the number of
// finished tasks: it is sampled at 10k finished tasks and at the end (`rss_10k_kib`,
// `rss_end_kib`), and every tenth of the way. Finished counts come from the server's
// /metrics (O(states)), so watching does not load it.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/child_process.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"

namespace gpusched::cli {
namespace {

namespace fs = std::filesystem;

// The value of `gpusched_tasks{state="S"}` (or of an unlabelled gauge) in a metrics text.
int64_t Metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + series.size() + 2));
}

struct Sample {
  int64_t finished = 0;
  int64_t rss_kib = 0;
  int64_t in_memory = 0;
};

struct SoakFlags {
  int64_t tasks = 200'000;
  int agents = 4;
  int clients = 8;
  bool json = false;
};

// The server and its agents, each a process of this binary.
struct SoakCluster {
  std::string address;
  int http = 0;
  ChildProcess server;
  std::vector<std::unique_ptr<ChildProcess>> agents;
};

// What the submitting clients and the watcher share.
struct SoakCounters {
  std::atomic<int64_t> next{0}, finished{0}, errors{0};
  std::atomic<bool> done{false};
};

// The server's memory as the run went: every tenth of the way, at 10k finished, at the end.
struct SoakSamples {
  std::vector<Sample> samples;
  Sample at_10k, at_end;
};

// Starts the server (SQLite in DIR/server) and `agents` noop agents; returns when all joined.
void StartSoakCluster(const fs::path& dir, int agents, SoakCluster& cluster) {
  const int port = FreeLoopbackPort();
  cluster.http = FreeLoopbackPort();
  cluster.address = "127.0.0.1:" + std::to_string(port);
  Status s = cluster.server.Start({"server", "--data-dir", (dir / "server").string(), "--listen",
                                   cluster.address, "--http",
                                   "127.0.0.1:" + std::to_string(cluster.http)},
                                  (dir / "server.log").string());
  if (!s.ok()) Fail(s);
  for (int i = 0; i < agents; ++i) {
    cluster.agents.push_back(std::make_unique<ChildProcess>());
    const std::string name = "soak-" + std::to_string(i);
    s = cluster.agents.back()->Start({"agent", "--server", cluster.address, "--name", name,
                                      "--gpus", "8x80GiB", "--executor", "noop", "--data-dir",
                                      (dir / name).string(), "--listen", "127.0.0.1:0"},
                                     (dir / (name + ".log")).string());
    if (!s.ok()) Fail(s);
  }
  s = E2eDriver(cluster.address).WaitForNodes(agents, 60'000);
  if (!s.ok()) Fail(s);
}

// `clients` threads submitting `tasks` noop tasks in all to `address`, at most 20,000 ahead
// of the finished ones (backpressure: the queue stays bounded).
std::vector<std::thread> StartSoakClients(const std::string& address, int clients, int64_t tasks,
                                          SoakCounters& n) {
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&n, address, tasks] {
      const int64_t max_in_flight = 20'000;
      E2eDriver d(address);
      core::TaskSpec spec;
      spec.gpus = 1;
      spec.gpu_mem_mib = 1024;
      spec.command = {"noop"};
      while (n.next.fetch_add(1) < tasks) {
        while (n.next.load() - n.finished.load() > max_in_flight && !n.done.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (!d.Submit(spec).ok()) ++n.errors;
      }
    });
  }
  return threads;
}

// Reads the server's /metrics until every task finished or failed to submit (or 30 minutes
// from `t0` passed), sampling its resident memory.
SoakSamples WatchSoak(SoakCluster& cluster, const SoakFlags& f, SoakCounters& n,
                      std::chrono::steady_clock::time_point t0) {
  SoakSamples out;
  int64_t next_sample = f.tasks / 10;
  for (;;) {
    const std::string m = HttpGetLoopback(cluster.http, "/metrics");
    const int64_t done = Metric(m, "gpusched_tasks{state=\"succeeded\"}") +
                         Metric(m, "gpusched_tasks{state=\"failed\"}");
    n.finished = done;
    const Sample now{done, ResidentKib(cluster.server.pid()),
                     Metric(m, "gpusched_tasks_in_memory")};
    if (out.at_10k.finished == 0 && done >= 10'000) out.at_10k = now;
    if (done >= next_sample) {
      out.samples.push_back(now);
      if (!f.json) {
        std::cerr << "bench soak: " << done << " finished, server RSS " << now.rss_kib
                  << " KiB, " << now.in_memory << " tasks in memory\n";
      }
      next_sample += f.tasks / 10;
    }
    if (done + n.errors.load() >= f.tasks ||
        std::chrono::steady_clock::now() - t0 > std::chrono::minutes(30)) {
      out.at_end = now;
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // poll period
  }
}

void PrintSoak(const SoakFlags& f, const SoakSamples& s, int64_t errors, double secs) {
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Sample& x : s.samples) {
      rows.push_back({{"finished", x.finished}, {"rss_kib", x.rss_kib},
                      {"tasks_in_memory", x.in_memory}});
    }
    std::cout << nlohmann::json{{"tasks", s.at_end.finished},
                                {"submit_errors", errors},
                                {"seconds", secs},
                                {"tasks_per_s", double(s.at_end.finished) / secs},
                                {"rss_10k_kib", s.at_10k.rss_kib},
                                {"rss_end_kib", s.at_end.rss_kib},
                                {"tasks_in_memory_end", s.at_end.in_memory},
                                {"samples", rows}}
                     .dump()
              << "\n";
  } else {
    std::cout << "bench soak: " << s.at_end.finished << "/" << f.tasks << " noop tasks in "
              << secs << " s (" << double(s.at_end.finished) / secs << " tasks/s)\n"
              << "  server RSS at 10k finished  " << s.at_10k.rss_kib << " KiB\n"
              << "  server RSS at the end       " << s.at_end.rss_kib << " KiB ("
              << s.at_end.in_memory << " tasks in memory)\n";
  }
}

void RunBenchSoak(const SoakFlags& f) {
  if (f.tasks < 1 || f.agents < 1 || f.clients < 1) {
    Fail(InvalidArgument("--tasks, --agents and --clients must be >= 1"));
  }
  const fs::path dir = fs::temp_directory_path() / ("gpusched-soak-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  SoakCluster cluster;
  StartSoakCluster(dir, f.agents, cluster);

  SoakCounters n;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads = StartSoakClients(cluster.address, f.clients, f.tasks, n);
  const SoakSamples samples = WatchSoak(cluster, f, n, t0);
  n.done = true;
  for (auto& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& a : cluster.agents) a->Kill(SIGKILL);
  cluster.server.Kill(SIGTERM);
  std::error_code ec;
  fs::remove_all(dir, ec);
  PrintSoak(f, samples, n.errors.load(), secs);
  if (samples.at_end.finished < f.tasks) ExitWith(kExitFailure);
}

}  // namespace

void RegisterBenchSoak(CLI::App& bench) {
  auto f = std::make_shared<SoakFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "soak", "Noop tasks through the real server and store: its memory per finished task");
  cmd->add_option("--tasks", f->tasks, "Tasks to run")->capture_default_str();
  cmd->add_option("--agents", f->agents, "Noop agents of 8 simulated GPUs")->capture_default_str();
  cmd->add_option("--clients", f->clients, "Concurrent submitting clients")->capture_default_str();
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->callback([f] { RunBenchSoak(*f); });
}

}  // namespace gpusched::cli
