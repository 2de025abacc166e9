#include "sim/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace gpusched::sim {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Seconds(TimeMs ms) {
  if (ms < 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

void WriteJson(std::ostream& out, const SimResult& r, const RunInfo& info) {
  const Summary& s = r.summary;
  out << "{\"jobs\": " << s.jobs << ", \"rejected\": " << s.rejected
      << ", \"unfinished\": " << s.unfinished << ", \"avg_jct_s\": " << Num(s.avg_jct_s)
      << ", \"p50_jct_s\": " << Num(s.p50_jct_s) << ", \"p99_jct_s\": " << Num(s.p99_jct_s)
      << ", \"avg_wait_s\": " << Num(s.avg_wait_s) << ", \"p50_wait_s\": " << Num(s.p50_wait_s)
      << ", \"p99_wait_s\": " << Num(s.p99_wait_s) << ", \"makespan_s\": " << Num(s.makespan_s)
      << ", \"gpu_utilization\": " << Num(s.gpu_utilization)
      << ", \"gpu_mem_utilization\": " << Num(s.gpu_mem_utilization)
      << ", \"node_fragmentation\": " << Num(s.node_fragmentation)
      << ", \"gpu_mem_fragmentation\": " << Num(s.gpu_mem_fragmentation)
      << ", \"gpu_idle_waiting_gpu_h\": " << Num(s.gpu_idle_waiting_gpu_h)
      << ", \"preemptions\": " << s.preemptions << ", \"policy\": " << JsonString(info.policy)
      << ", \"placement\": " << JsonString(info.placement)
      << ", \"trace\": " << JsonString(info.trace) << ", \"format\": " << JsonString(info.format)
      << ", \"cluster\": " << JsonString(info.cluster) << ", \"cluster_gpus\": " << r.total_gpus
      << ", \"skipped_lines\": " << info.skipped_lines << ", \"events\": " << r.events
      << ", \"passes\": " << r.stats.passes;
  if (r.stats.las_promotions > 0) out << ", \"las_promotions\": " << r.stats.las_promotions;
  if (r.stats.gangs_placed > 0) out << ", \"gangs_placed\": " << r.stats.gangs_placed;
  if (r.stats.gang_timeouts > 0) out << ", \"gang_timeouts\": " << r.stats.gang_timeouts;
  if (r.stats.priority_preemptions > 0) {
    out << ", \"priority_preemptions\": " << r.stats.priority_preemptions;
  }
  if (r.stats.order_preemptions > 0) {
    out << ", \"order_preemptions\": " << r.stats.order_preemptions;
  }
  if (info.synthetic) out << ", \"seed\": " << info.seed;
  if (info.wall_s >= 0) out << ", \"wall_s\": " << Num(info.wall_s);
  if (!r.allocation.curve.empty()) {
    const AllocationResult& a = r.allocation;
    out << ", \"unallocated_jobs\": " << s.unallocated
        << ", \"allocation_rate\": " << Num(a.allocation_rate)
        << ", \"allocated_gpus\": " << Num(a.allocated_gpus)
        << ", \"arrived_gpus\": " << Num(a.arrived_gpus)
        << ", \"unallocated_gpus\": " << Num(a.unallocated_gpus);
  }
  out << "}\n";
}

void WriteSummaryTable(std::ostream& out, const SimResult& r, const RunInfo& info) {
  const Summary& s = r.summary;
  auto row = [&out](const std::string& name, const std::string& value) {
    out << "  " << std::left << std::setw(26) << name << value << "\n";
  };
  out << "gpusched sim: " << info.trace << " (" << info.format << ") on " << info.cluster << " ("
      << r.total_gpus << " GPUs), policy " << info.policy << ", placement " << info.placement
      << "\n";
  if (info.synthetic) row("seed", std::to_string(info.seed));
  row(r.allocation.curve.empty() ? "jobs finished" : "pods placed", std::to_string(s.jobs));
  if (s.rejected > 0) row("rejected (never fit)", std::to_string(s.rejected));
  if (s.unfinished > 0) row("unfinished", std::to_string(s.unfinished));
  if (info.skipped_lines > 0) row("skipped lines", std::to_string(info.skipped_lines));
  if (!r.allocation.curve.empty()) {
    const AllocationResult& a = r.allocation;
    row("arrived GPUs", Num(a.arrived_gpus) + " of " + Num(a.total_gpus));
    row("allocated GPUs", Num(a.allocated_gpus));
    row("allocation rate", Num(100 * a.allocation_rate) + " %");
    row("unallocated GPUs", Num(a.unallocated_gpus) + " (" + std::to_string(s.unallocated) +
                                " pods)");
    return;
  }
  row("JCT avg / p50 / p99", Num(s.avg_jct_s) + " / " + Num(s.p50_jct_s) + " / " +
                                 Num(s.p99_jct_s) + " s");
  row("wait avg / p50 / p99", Num(s.avg_wait_s) + " / " + Num(s.p50_wait_s) + " / " +
                                  Num(s.p99_wait_s) + " s");
  row("makespan", Num(s.makespan_s) + " s (" + Num(s.makespan_s / 3600) + " h)");
  row("GPU utilisation", Num(100 * s.gpu_utilization) + " %");
  row("GPU-memory utilisation", Num(100 * s.gpu_mem_utilization) + " %");
  row("node fragmentation", Num(100 * s.node_fragmentation) + " %");
  row("GPU-memory fragmentation", Num(100 * s.gpu_mem_fragmentation) + " %");
  row("GPU idle while waiting", Num(s.gpu_idle_waiting_gpu_h) + " GPU-h");
  row("preemptions", std::to_string(s.preemptions));
  if (r.stats.order_preemptions > 0) {
    row("order preemptions", std::to_string(r.stats.order_preemptions));
  }
  if (r.stats.las_promotions > 0) row("2D-LAS promotions", std::to_string(r.stats.las_promotions));
  if (r.stats.gangs_placed > 0) row("gangs placed", std::to_string(r.stats.gangs_placed));
  if (r.stats.gang_timeouts > 0) row("gang timeouts", std::to_string(r.stats.gang_timeouts));
  if (r.stats.priority_preemptions > 0) {
    row("priority preemptions", std::to_string(r.stats.priority_preemptions));
  }
  row("scheduler passes", std::to_string(r.stats.passes));
  if (info.wall_s >= 0) row("replay time", Num(info.wall_s) + " s");
}

void WriteJobsCsv(std::ostream& out, const SimResult& r) {
  out << "job_id,num_gpu,gpu_share,submit_s,start_s,finish_s,duration_s,jct_s,wait_s,"
         "preemptions,outcome\n";
  for (const JobRecord& j : r.jobs) {
    const bool done = j.outcome == JobOutcome::kFinished && j.finish_ms >= 0;
    out << j.id << ',' << j.num_gpu << ',' << Num(j.gpu_share) << ',' << Seconds(j.submit_ms)
        << ',' << Seconds(j.start_ms) << ',' << Seconds(j.finish_ms) << ','
        << Seconds(j.duration_ms) << ',' << (done ? Seconds(j.finish_ms - j.submit_ms) : "")
        << ',' << (done ? Seconds(j.finish_ms - j.submit_ms - j.duration_ms) : "") << ','
        << j.preemptions << ',' << JobOutcomeName(j.outcome) << '\n';
  }
}

void WriteUsageCsv(std::ostream& out, const SimResult& r) {
  out << "time_s,busy_gpus,reserved_gpu_mib,fragmented_free_gpus,fragmented_free_mib,queued\n";
  for (const UsageSample& s : r.usage) {
    out << Seconds(s.at_ms) << ',' << s.busy_gpus << ',' << s.reserved_gpu_mib << ','
        << s.fragmented_free_gpus << ',' << s.fragmented_free_mib << ',' << s.queued << '\n';
  }
}

}  // namespace gpusched::sim
