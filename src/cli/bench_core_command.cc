// `gpusched bench core [--json]`: placement decisions per second of core::Scheduler.

#include <iostream>

#include "bench/core_bench.h"
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
}

}  // namespace gpusched::cli
