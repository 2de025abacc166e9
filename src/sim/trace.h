#pragma once
// Traces the simulator replays: one TraceJob per job (Philly) or pod (Alibaba), read from
// the files described in ../shared/traces/README.md or from the plain CSV format of
// DESIGN.md "The command line":
//
//   csv           job_id,num_gpu,submit_time,duration[,gpu_mem_mib,cpu_milli,mem_mib,cluster]
//                 (seconds; columns found by header name, extra columns ignored)
//   philly        philly_jobs_pollux.csv: timestamp,duration,num_gpus,gpu_time,cluster;
//                 submit = timestamp minus the earliest timestamp (rows are not sorted)
//   philly-rfold  philly_jobs_rfold.csv: #job id,arrival time (sec),topology,shape,size,
//                 duration (sec)
//   alibaba       openb_pod_list: name,cpu_milli,memory_mib,num_gpu,gpu_milli,...,
//                 creation_time,deletion_time,scheduled_time; run time = deletion minus
//                 scheduled time (minus creation time for pods the trace never scheduled)
//
// A line that cannot be parsed is an error naming the file, line, field and value, or, with
// LoadOptions::skip_bad_lines, is skipped and counted. Blank lines are ignored. Jobs come
// back sorted by (submit time, line), so replay order is deterministic.

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/units.h"

namespace gpusched::sim {

enum class TraceFormat { kCsv, kPhilly, kPhillyRfold, kAlibaba };

StatusOr<TraceFormat> ParseTraceFormat(std::string_view name);
const char* TraceFormatName(TraceFormat format);

struct TraceJob {
  std::string id;
  int64_t num_gpu = 0;
  // Share of one GPU in thousandths when the job asks for part of one GPU (Alibaba
  // gpu_milli); 1000 = whole GPUs, held exclusively.
  int64_t gpu_milli = 1000;
  MiB gpu_mem_mib = 0;  // explicit GPU memory per GPU (plain CSV); 0 = not given
  int64_t cpu_milli = 0;
  MiB mem_mib = 0;
  TimeMs submit_ms = 0;
  DurationMs duration_ms = 0;  // true run time
  std::string cluster;         // Philly virtual cluster, if any
  int64_t line = 0;            // 1-based line in the file
};

struct Trace {
  std::string name;  // the file it came from
  std::vector<TraceJob> jobs;
  int64_t skipped_lines = 0;
  std::string first_skipped_error;  // the first skipped line's error, for the report
};

struct LoadOptions {
  bool skip_bad_lines = false;
};

StatusOr<Trace> LoadTrace(const std::string& path, TraceFormat format,
                          const LoadOptions& options = {});
// The same from a stream; `name` is used in errors.
StatusOr<Trace> ParseTrace(std::istream& in, const std::string& name, TraceFormat format,
                           const LoadOptions& options = {});

}  // namespace gpusched::sim
