#pragma once
// Reports of a simulation: the one-object JSON of DESIGN.md ("sim --json": at least jobs,
// avg_jct_s, p50_jct_s, p99_jct_s, avg_wait_s, makespan_s, gpu_utilization), a summary
// table, CSV files and PNG plots drawn by gnuplot.
//
// Files written by WriteOutputs into DIR:
//   summary.json     the JSON object
//   jobs.csv         job_id,num_gpu,gpu_share,submit_s,start_s,finish_s,duration_s,jct_s,
//                    wait_s,preemptions,outcome
//   usage.csv        time_s,busy_gpus,reserved_gpu_mib,fragmented_free_gpus,
//                    fragmented_free_mib,queued (one row per change)
//   allocation.csv   arrived_gpus,allocated_gpus (allocation replay only)
//   plots.gp         the gnuplot script; utilization.png, jct_cdf.png or allocation.png

#include <ostream>
#include <string>

#include "base/status.h"
#include "sim/simulator.h"

namespace gpusched::sim {

// Facts about the run that are not in SimResult.
struct RunInfo {
  std::string trace;
  std::string format;
  std::string cluster;
  std::string policy;
  std::string placement;
  int64_t skipped_lines = 0;
  bool synthetic = false;
  uint64_t seed = 0;      // synthetic traces only
  double wall_s = -1;     // how long the replay took; < 0 = not measured
};

void WriteJson(std::ostream& out, const SimResult& r, const RunInfo& info);
void WriteSummaryTable(std::ostream& out, const SimResult& r, const RunInfo& info);
void WriteJobsCsv(std::ostream& out, const SimResult& r);
void WriteUsageCsv(std::ostream& out, const SimResult& r);

// Writes every file above into `dir` (created if missing) and runs gnuplot on plots.gp.
// A missing gnuplot is not an error: the PNGs are skipped and `warning` says so.
Status WriteOutputs(const std::string& dir, const SimResult& r, const RunInfo& info,
                    std::string* warning);

}  // namespace gpusched::sim
