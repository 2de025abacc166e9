// `gpusched bench core [--json]`: placement decisions per second of core::Scheduler.

#include <iostream>

#include "bench/core_bench.h"
#include "bench/filter_bench.h"
#include "bench/waiting_bench.h"
#include "cli/commands.h"

namespace gpusched::cli {

void RegisterBenchCore(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("core", "Placement decisions per second of the core scheduler");
  auto json = std::make_shared<bool>(false);
  auto seed = std::make_shared<uint64_t>(42);
  auto pending = std::make_shared<int64_t>(10'000);
  auto sizes = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{100, 1000, 10000});
  cmd->add_flag("--json", *json, "Print a JSON array");
  cmd->add_option("--seed", *seed, "Workload seed")->capture_default_str();
  cmd->add_option("--pending", *pending, "Pending tasks per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  cmd->add_option("--nodes", *sizes, "Cluster sizes (nodes of 8 GPUs)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd->callback([=] {
    std::vector<bench::CoreBenchResult> results;
    for (int64_t nodes : *sizes) {
      bench::CoreBenchConfig c;
      c.nodes = nodes;
      c.pending = *pending;
      c.seed = *seed;
      results.push_back(bench::RunCoreBench(c));
      if (!*json) bench::PrintCoreBenchRow(std::cout, results.back());
    }
    if (*json) bench::PrintCoreBenchJson(std::cout, results);
  });
  RegisterBenchFilter(bench);
  RegisterBenchWaiting(bench);
}

// `gpusched bench filter`: from which cluster size the parallel node filter pays here
// (CN115981827A claim 1; the server's parallel_threshold).
void RegisterBenchFilter(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "filter", "Sequential vs parallel node filter per cluster size (where N_par belongs)");
  auto json = std::make_shared<bool>(false);
  auto config = std::make_shared<bench::FilterBenchConfig>();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_option("--nodes", config->nodes, "Cluster sizes (reachable nodes of 8 GPUs)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd->add_option("--workers", config->workers, "Pool threads (0 = one per core, at most W)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1024}));
  cmd->add_option("--chunks", config->chunks, "W, chunks of the node list")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1024}));
  cmd->callback([=] {
    const bench::FilterBenchResult r = bench::RunFilterBench(*config);
    if (*json) {
      bench::PrintFilterBenchJson(std::cout, r);
    } else {
      bench::PrintFilterBench(std::cout, r);
    }
  });
}

// `gpusched bench waiting`: what a release pass costs with W tasks waiting in FQ for
// capacity (issue 43; bench/waiting_bench.h).
void RegisterBenchWaiting(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "waiting", "Release pass time with many tasks waiting in the failure queue for capacity");
  auto json = std::make_shared<bool>(false);
  auto config = std::make_shared<bench::WaitingBenchConfig>();
  auto sizes = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{10'000, 100'000});
  cmd->add_flag("--json", *json, "Print a JSON array");
  cmd->add_option("--waiting", *sizes, "Tasks waiting in FQ, one run per value")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  cmd->add_option("--nodes", config->nodes, "Nodes of 8 GPUs, every GPU busy")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  cmd->add_option("--releases", config->releases, "Release passes timed per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  cmd->add_option("--seed", config->seed, "Workload seed")->capture_default_str();
  cmd->callback([=] {
    std::vector<bench::WaitingBenchResult> results;
    for (int64_t waiting : *sizes) {
      bench::WaitingBenchConfig c = *config;
      c.waiting = waiting;
      results.push_back(bench::RunWaitingBench(c));
      if (!*json) bench::PrintWaitingBenchRow(std::cout, results.back());
    }
    if (*json) bench::PrintWaitingBenchJson(std::cout, results);
  });
}

}  // namespace gpusched::cli
