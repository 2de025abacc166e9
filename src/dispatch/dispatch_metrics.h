#pragma once
// Metrics of a dispatcher: per-service queueing delay and run time, per-GPU occupancy, and per
// (service, GPU) histograms of latency and queue wait (issue 42), from which p50 and p99 are
// computed (prometheus_text.h renders them). MetricsRecorder accumulates them; it is not
// thread-safe (the dispatcher calls it under its lock). Snapshot() returns plain values
// readable from C++ and, through the C ABI, from C. Memory is fixed at construction: a
// histogram has kHistogramBoundsMs.size() + 1 counters, whatever it counts.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gpusched::dispatch {

// Fixed log-spaced bucket bounds (upper, inclusive), ms: 1-2-5 per decade, 0.1 ms to 60 s. A
// quantile read from them is known within its bucket: a factor of 2 or 2.5.
inline constexpr std::array<double, 18> kHistogramBoundsMs = {
    0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000};

// Observations per bucket: counts[i] for values <= kHistogramBoundsMs[i] (and above the bound
// before), counts.back() for values above the last bound. Not cumulative.
struct Histogram {
  std::array<uint64_t, kHistogramBoundsMs.size() + 1> counts{};
  uint64_t count = 0;
  double sum_ms = 0;
  void Add(double ms);
  // The q-quantile (0 < q <= 1), interpolated linearly inside its bucket (as Prometheus'
  // histogram_quantile does); 0 when empty; the last finite bound when it lies above it.
  double Quantile(double q) const;
};

// The histograms of the requests of one service that ran on one GPU.
struct LatencyCell {
  int service = 0;
  int gpu = 0;
  Histogram latency;     // arrival -> released (queue wait + run), ms
  Histogram queue_wait;  // arrival -> GPU granted, ms
};

struct ServiceMetrics {
  std::string name;
  uint64_t completed = 0;     // leases released, failed ones included
  uint64_t failed = 0;        // released as failed: their run time did not train cost_time
  uint64_t give_ups = 0;      // rounds that ended in GIVE_UP (claim 2 retries)
  uint64_t direct_grabs = 0;  // grants after the wait budget was spent (claim 3)
  double queue_ms_mean = 0;   // arrival -> GPU granted
  double queue_ms_max = 0;
  double run_ms_mean = 0;     // GPU granted -> Complete
  double run_ms_max = 0;
  double cost_time_ms = 0;    // the current learned cost (claim 6)
  uint64_t timeouts = 0;      // acquires ended by their deadline or acquire_timeout (filled in
                              // by the C ABI, which sees them; 0 from Snapshot)
  // completed and failed of every process sharing the marks (issue 42: the metrics text);
  // without shared marks, completed and failed.
  uint64_t all_completed = 0, all_failed = 0;
};

struct GpuMetrics {
  int gpu = 0;
  int running = 0;           // leases granted and not yet completed
  uint64_t started = 0;      // leases granted so far
  double busy_ms = 0;        // time with at least one lease running
  double occupancy = 0;      // busy_ms / time since the dispatcher was created
  double mean_running = 0;   // time-averaged number of running leases
};

struct DispatchMetrics {
  double elapsed_ms = 0;
  std::vector<ServiceMetrics> services;
  std::vector<GpuMetrics> gpus;
  std::vector<LatencyCell> cells;  // service-major: cells[service * gpus.size() + gpu]
};

class MetricsRecorder {
 public:
  MetricsRecorder(std::vector<std::string> service_names, int gpu_count, int64_t start_ns);

  void OnGiveUp(int service) { services_[service].m.give_ups++; }
  void OnFailed(int service) { services_[service].m.failed++; }
  void OnGrant(int service, int gpu, bool direct, int64_t now_ns);
  void OnComplete(int service, int gpu, double queue_ms, double run_ms, int64_t now_ns);
  // `costs_ms[i]` is service i's current cost estimate.
  DispatchMetrics Snapshot(int64_t now_ns, const std::vector<double>& costs_ms) const;

 private:
  struct Service {
    ServiceMetrics m;
    double queue_sum = 0, run_sum = 0;
  };
  struct Gpu {
    int running = 0;
    uint64_t started = 0;
    int64_t busy_ns = 0, lease_ns = 0;  // lease_ns integrates `running` over time
    int64_t last_ns = 0;                // last change of `running`
  };
  void Account(Gpu& g, int64_t now_ns);

  int64_t start_ns_;
  std::vector<Service> services_;
  std::vector<Gpu> gpus_;
  std::vector<LatencyCell> cells_;  // as DispatchMetrics::cells
};

}  // namespace gpusched::dispatch
