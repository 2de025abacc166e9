#pragma once
// The core placement benchmark behind `gpusched bench core`: a cluster of N nodes x 8 GPUs,
// P pending tasks (mixed whole-GPU and shared-memory), one scheduling pass timed on one core,
// through the node index and by the scan, which must decide the same.

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

// One pass places or parks every pending task: an attempt each. With the failed-shape memo on,
// an attempt whose request shape already found no node in the pass is answered from the memo
// (a memo hit, no node scan); the others are evaluated against the nodes.
struct CoreBenchResult {
  CoreBenchConfig config;
  int64_t attempts = 0;   // = pending
  int64_t evaluated = 0;  // attempts that looked at the nodes (a decision each)
  int64_t memo_hits = 0;  // attempts answered from the memo; attempts = evaluated + memo_hits
  int64_t placed = 0;
  // Decisions through the node index (issue 43), the default: the fastest pass with the memo
  // on; memo hits are in its time, not in the count.
  double seconds = 0;
  double decisions_per_s = 0;
  double attempts_per_s = 0;  // attempts per second of the same pass, memo hits included
  // The same pass scanning every node (placement index off), one thread: the same decisions
  // (checked) and the same memo hits.
  double scan_seconds = 0;
  double scan_decisions_per_s = 0;
  double speedup = 0;  // decisions_per_s / scan_decisions_per_s
  // The scan with CN115981827A claim 1's parallel filter on a pool of one thread per core
  // (chunks above N_par reachable nodes); `parallel_decisions` of them ran in chunks.
  double parallel_scan_decisions_per_s = 0;
  int64_t parallel_decisions = 0;
  // The index pass with the memo off: every attempt is a decision.
  double uncached_decisions_per_s = 0;
  double ns_per_node_scan = 0;  // scan pass time / (decisions x nodes)
};

// Node i of the benchmark clusters: "node-%05d", 128 cores, 1 TiB RAM, `gpus` H100s of 80 GiB.
core::NodeSpec BenchNode(int64_t i, int64_t gpus);

CoreBenchResult RunCoreBench(const CoreBenchConfig& config);
void PrintCoreBenchRow(std::ostream& out, const CoreBenchResult& r);
void PrintCoreBenchJson(std::ostream& out, const std::vector<CoreBenchResult>& results);

}  // namespace gpusched::bench
