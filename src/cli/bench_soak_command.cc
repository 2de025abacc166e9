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

}  // namespace

void RegisterBenchSoak(CLI::App& bench) {
  auto tasks = std::make_shared<int64_t>(200'000);
  auto agents = std::make_shared<int>(4);
  auto clients = std::make_shared<int>(8);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "soak", "Noop tasks through the real server and store: its memory per finished task");
  cmd->add_option("--tasks", *tasks, "Tasks to run")->capture_default_str();
  cmd->add_option("--agents", *agents, "Noop agents of 8 simulated GPUs")->capture_default_str();
  cmd->add_option("--clients", *clients, "Concurrent submitting clients")->capture_default_str();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([=] {
    if (*tasks < 1 || *agents < 1 || *clients < 1) {
      Fail(InvalidArgument("--tasks, --agents and --clients must be >= 1"));
    }
    const fs::path dir = fs::temp_directory_path() / ("gpusched-soak-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const int port = FreeLoopbackPort(), http = FreeLoopbackPort();
    const std::string address = "127.0.0.1:" + std::to_string(port);
    ChildProcess server;
    Status s = server.Start({"server", "--data-dir", (dir / "server").string(), "--listen",
                             address, "--http", "127.0.0.1:" + std::to_string(http)},
                            (dir / "server.log").string());
    if (!s.ok()) Fail(s);
    std::vector<std::unique_ptr<ChildProcess>> agent_procs;
    for (int i = 0; i < *agents; ++i) {
      agent_procs.push_back(std::make_unique<ChildProcess>());
      const std::string name = "soak-" + std::to_string(i);
      s = agent_procs.back()->Start({"agent", "--server", address, "--name", name, "--gpus",
                                     "8x80GiB", "--executor", "noop", "--data-dir",
                                     (dir / name).string(), "--listen", "127.0.0.1:0"},
                                    (dir / (name + ".log")).string());
      if (!s.ok()) Fail(s);
    }
    s = E2eDriver(address).WaitForNodes(*agents, 60'000);
    if (!s.ok()) Fail(s);

    std::atomic<int64_t> next{0}, finished{0}, errors{0};
    std::atomic<bool> done{false};
    const int64_t max_in_flight = 20'000;  // backpressure: the queue stays bounded
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < *clients; ++c) {
      threads.emplace_back([&] {
        E2eDriver d(address);
        core::TaskSpec spec;
        spec.gpus = 1;
        spec.gpu_mem_mib = 1024;
        spec.command = {"noop"};
        while (next.fetch_add(1) < *tasks) {
          while (next.load() - finished.load() > max_in_flight && !done.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          if (!d.Submit(spec).ok()) ++errors;
        }
      });
    }
    std::vector<Sample> samples;
    Sample at_10k, at_end;
    int64_t next_sample = *tasks / 10;
    for (;;) {
      const std::string m = HttpGetLoopback(http, "/metrics");
      const int64_t f = Metric(m, "gpusched_tasks{state=\"succeeded\"}") +
                        Metric(m, "gpusched_tasks{state=\"failed\"}");
      finished = f;
      const Sample now{f, ResidentKib(server.pid()), Metric(m, "gpusched_tasks_in_memory")};
      if (at_10k.finished == 0 && f >= 10'000) at_10k = now;
      if (f >= next_sample) {
        samples.push_back(now);
        if (!*json) {
          std::cerr << "bench soak: " << f << " finished, server RSS " << now.rss_kib
                    << " KiB, " << now.in_memory << " tasks in memory\n";
        }
        next_sample += *tasks / 10;
      }
      if (f + errors.load() >= *tasks) {
        at_end = now;
        break;
      }
      if (std::chrono::steady_clock::now() - t0 > std::chrono::minutes(30)) {
        at_end = now;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // poll period
    }
    done = true;
    for (auto& t : threads) t.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& a : agent_procs) a->Kill(SIGKILL);
    server.Kill(SIGTERM);
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (*json) {
      nlohmann::json rows = nlohmann::json::array();
      for (const Sample& x : samples) {
        rows.push_back({{"finished", x.finished}, {"rss_kib", x.rss_kib},
                        {"tasks_in_memory", x.in_memory}});
      }
      std::cout << nlohmann::json{{"tasks", at_end.finished},
                                  {"submit_errors", errors.load()},
                                  {"seconds", secs},
                                  {"tasks_per_s", double(at_end.finished) / secs},
                                  {"rss_10k_kib", at_10k.rss_kib},
                                  {"rss_end_kib", at_end.rss_kib},
                                  {"tasks_in_memory_end", at_end.in_memory},
                                  {"samples", rows}}
                       .dump()
                << "\n";
    } else {
      std::cout << "bench soak: " << at_end.finished << "/" << *tasks << " noop tasks in "
                << secs << " s (" << double(at_end.finished) / secs << " tasks/s)\n"
                << "  server RSS at 10k finished  " << at_10k.rss_kib << " KiB\n"
                << "  server RSS at the end       " << at_end.rss_kib << " KiB ("
                << at_end.in_memory << " tasks in memory)\n";
    }
    if (at_end.finished < *tasks) ExitWith(kExitFailure);
  });
}

}  // namespace gpusched::cli
