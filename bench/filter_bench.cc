#include "bench/filter_bench.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <thread>

#include "base/check.h"
#include "base/clock.h"
#include "base/executor.h"
#include "bench/core_bench.h"
#include "core/placement.h"

namespace gpusched::bench {
namespace {

// Best of `repetitions` of `decisions` Place() calls, in microseconds per call.
double TimePlace(const core::Placer& placer, const core::ClusterState& cluster,
                 const core::PlacementRequest& r, int64_t decisions, int repetitions,
                 std::string* chosen) {
  RealClock wall;
  double best = std::numeric_limits<double>::max();
  for (int rep = 0; rep < repetitions; ++rep) {
    const int64_t start = wall.NowNs();
    for (int64_t i = 0; i < decisions; ++i) {
      core::PlacementResult result = placer.Place(cluster, r);
      GS_CHECK(result.placed());
      if (i == 0) *chosen = result.placement.node;
    }
    best = std::min(best, static_cast<double>(wall.NowNs() - start) / 1e3 /
                              static_cast<double>(decisions));
  }
  return best;
}

}  // namespace

FilterBenchResult RunFilterBench(const FilterBenchConfig& c) {
  FilterBenchResult out;
  out.chunks = std::max<size_t>(1, c.chunks);
  out.workers = c.workers > 0
                    ? c.workers
                    : std::min<size_t>(out.chunks, std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(out.workers);
  core::PlacementOptions sequential, parallel;
  sequential.parallel_threshold = std::numeric_limits<size_t>::max();
  parallel.parallel_threshold = 0;
  parallel.parallel_chunks = out.chunks;
  const core::Placer seq(sequential, nullptr), par(parallel, &pool);
  core::PlacementRequest r;  // a 4 GiB share of one GPU: fits every node
  r.gpus = 1;
  r.gpu_mem_mib = 4 * 1024;
  r.resources = {1000, 4 * 1024};
  for (int64_t nodes : c.nodes) {
    core::ClusterState cluster;
    for (int64_t i = 0; i < nodes; ++i) GS_CHECK(cluster.Upsert(BenchNode(i, 8), 0).ok());
    FilterBenchRow row;
    row.nodes = nodes;
    row.decisions = std::max<int64_t>(20, 400'000 / std::max<int64_t>(1, nodes));
    std::string a, b;
    row.sequential_us = TimePlace(seq, cluster, r, row.decisions, c.repetitions, &a);
    row.parallel_us = TimePlace(par, cluster, r, row.decisions, c.repetitions, &b);
    GS_CHECK(a == b);  // the parallel filter must choose the same node
    out.rows.push_back(row);
  }
  for (size_t i = out.rows.size(); i-- > 0;) {
    if (out.rows[i].parallel_us >= out.rows[i].sequential_us) break;
    out.pays_from = out.rows[i].nodes;
  }
  return out;
}

void PrintFilterBench(std::ostream& out, const FilterBenchResult& r) {
  char line[160];
  std::snprintf(line, sizeof line, "parallel node filter: %zu workers, W = %zu chunks\n",
                r.workers, r.chunks);
  out << line;
  out << "   nodes  decisions  sequential_us  parallel_us  speedup\n";
  for (const FilterBenchRow& row : r.rows) {
    std::snprintf(line, sizeof line, "%8lld  %9lld  %13.2f  %11.2f  %7.2f\n",
                  static_cast<long long>(row.nodes), static_cast<long long>(row.decisions),
                  row.sequential_us, row.parallel_us, row.sequential_us / row.parallel_us);
    out << line;
  }
  if (r.pays_from < 0) {
    out << "parallel never paid at these sizes: keep parallel_threshold above the largest\n";
  } else {
    out << "parallel pays from " << r.pays_from
        << " reachable nodes: set parallel_threshold just below that\n";
  }
}

void PrintFilterBenchJson(std::ostream& out, const FilterBenchResult& r) {
  char buf[200];
  out << "{\"workers\": " << r.workers << ", \"chunks\": " << r.chunks
      << ", \"pays_from\": " << r.pays_from << ", \"rows\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const FilterBenchRow& row = r.rows[i];
    std::snprintf(buf, sizeof buf,
                  "%s{\"nodes\": %lld, \"decisions\": %lld, \"sequential_us\": %.3f, "
                  "\"parallel_us\": %.3f}",
                  i == 0 ? "" : ", ", static_cast<long long>(row.nodes),
                  static_cast<long long>(row.decisions), row.sequential_us, row.parallel_us);
    out << buf;
  }
  out << "]}\n";
}

}  // namespace gpusched::bench
