#include "dispatch/dispatch_metrics.h"

#include <algorithm>

namespace gpusched::dispatch {

MetricsRecorder::MetricsRecorder(std::vector<std::string> service_names, int gpu_count,
                                 int64_t start_ns)
    : start_ns_(start_ns), services_(service_names.size()), gpus_(gpu_count) {
  for (size_t i = 0; i < service_names.size(); ++i) services_[i].m.name = service_names[i];
  for (Gpu& g : gpus_) g.last_ns = start_ns;
  for (size_t s = 0; s < service_names.size(); ++s) {
    for (int g = 0; g < gpu_count; ++g) cells_.push_back({static_cast<int>(s), g, {}, {}});
  }
}

void Histogram::Add(double ms) {
  size_t i = 0;
  while (i < kHistogramBoundsMs.size() && ms > kHistogramBoundsMs[i]) ++i;
  counts[i]++;
  count++;
  sum_ms += ms;
}

double Histogram::Quantile(double q) const {
  if (count == 0) return 0;
  const double rank = q * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < kHistogramBoundsMs.size(); ++i) {
    if (static_cast<double>(below + counts[i]) >= rank && counts[i] > 0) {
      const double lo = i == 0 ? 0 : kHistogramBoundsMs[i - 1];
      const double within = (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
      return lo + (kHistogramBoundsMs[i] - lo) * within;
    }
    below += counts[i];
  }
  return kHistogramBoundsMs.back();
}

void MetricsRecorder::Account(Gpu& g, int64_t now_ns) {
  const int64_t dt = now_ns - g.last_ns;
  if (g.running > 0) g.busy_ns += dt;
  g.lease_ns += dt * g.running;
  g.last_ns = now_ns;
}

void MetricsRecorder::OnGrant(int service, int gpu, bool direct, int64_t now_ns) {
  if (direct) services_[service].m.direct_grabs++;
  Gpu& g = gpus_[gpu];
  Account(g, now_ns);
  g.running++;
  g.started++;
}

void MetricsRecorder::OnComplete(int service, int gpu, double queue_ms, double run_ms,
                                 int64_t now_ns) {
  Service& s = services_[service];
  s.m.completed++;
  s.queue_sum += queue_ms;
  s.run_sum += run_ms;
  s.m.queue_ms_max = std::max(s.m.queue_ms_max, queue_ms);
  s.m.run_ms_max = std::max(s.m.run_ms_max, run_ms);
  LatencyCell& cell = cells_[static_cast<size_t>(service) * gpus_.size() + gpu];
  cell.latency.Add(queue_ms + run_ms);
  cell.queue_wait.Add(queue_ms);
  Gpu& g = gpus_[gpu];
  Account(g, now_ns);
  g.running--;
}

DispatchMetrics MetricsRecorder::Snapshot(int64_t now_ns, const std::vector<double>& costs_ms) const {
  DispatchMetrics out;
  const int64_t elapsed_ns = now_ns - start_ns_;
  out.elapsed_ms = static_cast<double>(elapsed_ns) / 1e6;
  for (size_t i = 0; i < services_.size(); ++i) {
    ServiceMetrics m = services_[i].m;
    if (m.completed > 0) {
      m.queue_ms_mean = services_[i].queue_sum / static_cast<double>(m.completed);
      m.run_ms_mean = services_[i].run_sum / static_cast<double>(m.completed);
    }
    m.cost_time_ms = costs_ms[i];
    m.all_completed = m.completed;
    m.all_failed = m.failed;
    out.services.push_back(std::move(m));
  }
  for (size_t i = 0; i < gpus_.size(); ++i) {
    Gpu g = gpus_[i];
    const int64_t dt = now_ns - g.last_ns;  // account the open interval without mutating
    if (g.running > 0) g.busy_ns += dt;
    g.lease_ns += dt * g.running;
    GpuMetrics m;
    m.gpu = static_cast<int>(i);
    m.running = g.running;
    m.started = g.started;
    m.busy_ms = static_cast<double>(g.busy_ns) / 1e6;
    if (elapsed_ns > 0) {
      m.occupancy = static_cast<double>(g.busy_ns) / static_cast<double>(elapsed_ns);
      m.mean_running = static_cast<double>(g.lease_ns) / static_cast<double>(elapsed_ns);
    }
    out.gpus.push_back(m);
  }
  out.cells = cells_;
  return out;
}

}  // namespace gpusched::dispatch
