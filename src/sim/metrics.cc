#include "sim/metrics.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>

#include "base/percentile.h"

namespace gpusched::sim {

const char* JobOutcomeName(JobOutcome o) {
  switch (o) {
    case JobOutcome::kFinished: return "finished";
    case JobOutcome::kRejected: return "rejected";
    case JobOutcome::kUnfinished: return "unfinished";
    case JobOutcome::kUnallocated: return "unallocated";
    case JobOutcome::kAllocated: return "allocated";
  }
  return "unknown";
}

namespace {

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// Time integrals of the usage step functions over [begin, end).
struct Integrals {
  double busy = 0, reserved = 0, frag_gpus = 0, frag_mib = 0, free_gpus = 0, free_mib = 0;
  double idle_waiting = 0;  // GPU-ms with no task while some task waited
};

Integrals Integrate(const std::vector<UsageSample>& usage, TimeMs begin, TimeMs end,
                    int64_t total_gpus, MiB total_mib) {
  Integrals in;
  for (size_t i = 0; i < usage.size(); ++i) {
    const TimeMs from = std::max(begin, usage[i].at_ms);
    const TimeMs to = std::min(end, i + 1 < usage.size() ? usage[i + 1].at_ms : end);
    if (to <= from) continue;
    const double dt = static_cast<double>(to - from);
    const UsageSample& s = usage[i];
    in.busy += dt * static_cast<double>(s.busy_gpus);
    in.reserved += dt * static_cast<double>(s.reserved_gpu_mib);
    in.frag_gpus += dt * static_cast<double>(s.fragmented_free_gpus);
    in.frag_mib += dt * static_cast<double>(s.fragmented_free_mib);
    in.free_gpus += dt * static_cast<double>(total_gpus - s.busy_gpus);
    in.free_mib += dt * static_cast<double>(total_mib - s.reserved_gpu_mib);
    if (s.queued > 0) in.idle_waiting += dt * static_cast<double>(total_gpus - s.busy_gpus);
  }
  return in;
}

}  // namespace

std::vector<TeamSummary> SummarizeByTeam(const std::vector<JobRecord>& jobs) {
  std::map<std::string, TeamSummary> by;
  for (const JobRecord& j : jobs) {
    if (j.outcome != JobOutcome::kFinished) continue;
    TeamSummary& t = by[j.team.empty() ? "default" : j.team];
    ++t.jobs;
    const double c = static_cast<double>(j.finish_ms - j.submit_ms) / 1000.0;
    t.avg_jct_s += c;
    t.avg_wait_s += c - static_cast<double>(j.duration_ms) / 1000.0;
  }
  std::vector<TeamSummary> out;
  for (auto& [name, t] : by) {
    t.team = name;
    t.avg_jct_s /= static_cast<double>(t.jobs);
    t.avg_wait_s /= static_cast<double>(t.jobs);
    out.push_back(t);
  }
  return out;
}

Summary Summarize(const std::vector<JobRecord>& jobs, const std::vector<UsageSample>& usage,
                  int64_t total_gpus, MiB total_gpu_mib) {
  Summary s;
  std::vector<double> jct, wait;
  TimeMs first_submit = std::numeric_limits<TimeMs>::max(), last_finish = 0;
  for (const JobRecord& j : jobs) {
    first_submit = std::min(first_submit, j.submit_ms);
    s.preemptions += j.preemptions;
    switch (j.outcome) {
      case JobOutcome::kFinished: break;
      case JobOutcome::kRejected: ++s.rejected; continue;
      case JobOutcome::kUnfinished: ++s.unfinished; continue;
      case JobOutcome::kUnallocated: ++s.unallocated; continue;
      case JobOutcome::kAllocated: ++s.jobs; continue;
    }
    ++s.jobs;
    last_finish = std::max(last_finish, j.finish_ms);
    const double c = static_cast<double>(j.finish_ms - j.submit_ms) / 1000.0;
    jct.push_back(c);
    wait.push_back(c - static_cast<double>(j.duration_ms) / 1000.0);
  }
  std::sort(jct.begin(), jct.end());
  std::sort(wait.begin(), wait.end());
  s.avg_jct_s = Mean(jct);
  s.p50_jct_s = Percentile(jct, 50);
  s.p99_jct_s = Percentile(jct, 99);
  s.avg_wait_s = Mean(wait);
  s.p50_wait_s = Percentile(wait, 50);
  s.p99_wait_s = Percentile(wait, 99);
  if (s.jobs == 0) return s;
  s.makespan_s = static_cast<double>(last_finish - first_submit) / 1000.0;
  const double span = static_cast<double>(last_finish - first_submit);
  if (span <= 0 || total_gpus <= 0) return s;
  const Integrals in = Integrate(usage, first_submit, last_finish, total_gpus, total_gpu_mib);
  s.gpu_utilization = in.busy / (span * static_cast<double>(total_gpus));
  if (total_gpu_mib > 0) s.gpu_mem_utilization = in.reserved / (span * static_cast<double>(total_gpu_mib));
  if (in.free_gpus > 0) s.node_fragmentation = in.frag_gpus / in.free_gpus;
  if (in.free_mib > 0) s.gpu_mem_fragmentation = in.frag_mib / in.free_mib;
  s.gpu_idle_waiting_gpu_h = in.idle_waiting / 3'600'000.0;
  return s;
}

}  // namespace gpusched::sim
