#pragma once
// The core placement benchmark behind `gpusched bench core`: a cluster of N nodes x 8 GPUs,
// P pending tasks (mixed whole-GPU and shared-memory), one scheduling pass timed on one core.

#include <cstdint>
#include <ostream>
#include <vector>

#include "core/node.h"

namespace gpusched::bench {

struct CoreBenchConfig {
  int64_t nodes = 1000;
  int64_t gpus_per_node = 8;
  int64_t pending = 10'000;
  uint64_t seed = 42;
  int repetitions = 3;  // best of
};

struct CoreBenchResult {
  CoreBenchConfig config;
  int64_t decisions = 0;
  int64_t placed = 0;
  double seconds = 0;
  double decisions_per_s = 0;
  // The same pass with the failed-shape memo off: every decision scans every node.
  double uncached_decisions_per_s = 0;
  double ns_per_node_scan = 0;  // uncached pass time / (decisions x nodes)
};

// Node i of the benchmark clusters: "node-%05d", 128 cores, 1 TiB RAM, `gpus` H100s of 80 GiB.
core::NodeSpec BenchNode(int64_t i, int64_t gpus);

CoreBenchResult RunCoreBench(const CoreBenchConfig& config);
void PrintCoreBenchRow(std::ostream& out, const CoreBenchResult& r);
void PrintCoreBenchJson(std::ostream& out, const std::vector<CoreBenchResult>& results);

}  // namespace gpusched::bench
