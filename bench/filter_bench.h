#pragma once
// The parallel node filter benchmark behind `gpusched bench filter` (CN115981827A claim 1):
// for each cluster size |M| (every node reachable, 8 GPUs each, every node feasible so each
// decision filters and scores all of them), the time of one Placer::Place sequentially and in
// W chunks on a pool of `workers` threads. Where parallel is faster is where N_par
// (`parallel_threshold`) belongs on this machine.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

namespace gpusched::bench {

struct FilterBenchConfig {
  std::vector<int64_t> nodes = {25, 50, 100, 200, 400, 800, 1600, 3200, 6400};
  size_t workers = 0;  // 0 = one per core, at most `chunks` (the server's default)
  size_t chunks = 16;  // W
  int repetitions = 3;  // best of
};

struct FilterBenchRow {
  int64_t nodes = 0;
  int64_t decisions = 0;  // per measurement
  double sequential_us = 0, parallel_us = 0;  // per decision, best of the repetitions
};

struct FilterBenchResult {
  size_t workers = 0, chunks = 0;
  std::vector<FilterBenchRow> rows;
  int64_t pays_from = -1;  // the smallest size from which parallel stays faster; -1 = never
};

FilterBenchResult RunFilterBench(const FilterBenchConfig& config);
void PrintFilterBench(std::ostream& out, const FilterBenchResult& r);
void PrintFilterBenchJson(std::ostream& out, const FilterBenchResult& r);

}  // namespace gpusched::bench
