#include "dispatch/bench/open_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>
#include <utility>

#include "base/percentile.h"
#include "base/work_pool.h"
#include "dispatch/gpusched_policy.h"
#include "dispatch/realtime_dispatcher.h"

namespace gpusched::dispatch {
namespace {

struct Request {
  int64_t arrival_ns;  // offset from the start
  int service;
  double work_ms;
  double hint_ms;  // its expected work as known at arrival (OpenLoopConfig::known_fraction)
  int model = -1;    // -1: none
  int32_t priority = 0;
};

// What the simulated GPUs hold between requests: the model each one has loaded.
struct GpuModels {
  explicit GpuModels(int gpus) : loaded(static_cast<size_t>(gpus)) {
    for (auto& m : loaded) m.store(-1);
  }
  std::vector<std::atomic<int>> loaded;
};

// The GPUs' summed speed (1 / time multiplier), for the arrival rate.
double Capacity(const OpenLoopConfig& c) {
  if (c.gpu_speed.empty()) return c.gpus;
  double sum = 0;
  for (double s : c.gpu_speed) sum += 1 / s;
  return sum;
}

std::vector<Request> MakeRequests(const OpenLoopConfig& c, Rng& rng) {
  double mean_work = 0;
  for (const auto& s : c.services) mean_work += s.share * s.mean_ms;
  const double rate_per_ms = c.load * Capacity(c) / mean_work;
  std::vector<Request> out;
  double t_ms = 0;
  for (int i = 0; i < c.requests; ++i) {
    t_ms += rng.Exponential(rate_per_ms);
    double u = rng.Uniform01();
    int s = 0;
    while (s + 1 < static_cast<int>(c.services.size()) && u >= c.services[s].share) {
      u -= c.services[s].share;
      ++s;
    }
    const BenchService& b = c.services[s];
    const double mu = std::log(b.mean_ms) - b.sigma * b.sigma / 2;  // so that the mean is mean_ms
    // log work = mu + known + unknown, independent normals whose variances add to sigma^2;
    // the hint is E[work | known] = exp(mu + known + unknown variance / 2).
    const double known_sigma = b.sigma * std::sqrt(c.known_fraction);
    const double unknown_sigma = b.sigma * std::sqrt(1 - c.known_fraction);
    const double known = known_sigma > 0 ? std::log(rng.LogNormal(0, known_sigma)) : 0;
    const double unknown = unknown_sigma > 0 ? std::log(rng.LogNormal(0, unknown_sigma)) : 0;
    out.push_back({static_cast<int64_t>(t_ms * 1e6), s, std::exp(mu + known + unknown),
                   std::exp(mu + known + unknown_sigma * unknown_sigma / 2)});
    // Drawn after the rest, and only in the issue 42 scenarios: the other rows' loads stay.
    if (c.models > 0) out.back().model = static_cast<int>(rng.Uniform01() * c.models) % c.models;
    if (c.high_priority_share > 0) out.back().priority = rng.Uniform01() < c.high_priority_share;
  }
  return out;
}

StatusOr<Lease> AcquireFor(DispatchPolicy& policy, const Request& r, const OpenLoopConfig& c) {
  // The policies that take a per-request estimate get the hint; the others the service.
  auto* node = dynamic_cast<NodeDispatcher*>(&policy);
  if (node == nullptr) return policy.Acquire(r.service);
  AcquireOptions options{.expected_ms = r.hint_ms};
  if (c.pass_placement_inputs) {
    if (r.model >= 0) options.model = "model-" + std::to_string(r.model);
    options.priority = r.priority;
  }
  return node->Acquire(r.service, options);
}

// One request: a GPU from the policy, a stream on it, the compute (scaled by the GPU's speed,
// plus a model load when another model is loaded there), release both.
RequestRecord Serve(DispatchPolicy& policy, std::vector<SimDevice*>& devices, const Request& r,
                    const OpenLoopConfig& c, GpuModels& models, RealClock& clock) {
  RequestRecord rec;
  rec.high_priority = r.priority > 0;
  StatusOr<Lease> lease = AcquireFor(policy, r, c);
  if (!lease.ok()) {
    rec.outcome = OutcomeOfAcquireError(lease.status());
    return rec;
  }
  SimDevice& dev = *devices[lease->gpu];
  double work_ms = r.work_ms;
  if (r.model >= 0 && models.loaded[lease->gpu].exchange(r.model) != r.model) {
    rec.model_loaded = true;
    work_ms += c.model_load_ms;
  }
  if (!c.gpu_speed.empty()) work_ms *= c.gpu_speed[lease->gpu];
  StatusOr<StreamId> stream = dev.AcquireStream();
  while (!stream.ok()) {  // every stream busy: the request queues on the GPU (polls every 50 µs)
    PreciseWaitUntilNs(clock, clock.NowNs() + 50'000);
    stream = dev.AcquireStream();
  }
  (void)dev.Launch(*stream, [&dev, work_ms](const KernelContext&) { dev.ComputeMs(work_ms); });
  (void)dev.Synchronize(*stream);
  (void)dev.ReleaseStream(*stream);
  policy.Complete(*lease);
  rec.outcome = RequestOutcome::kServed;
  return rec;
}

// p50 and p99 (nearest rank) of the served requests of one priority class; 0 when none.
std::pair<double, double> ClassPercentiles(const std::vector<RequestRecord>& records, bool high) {
  std::vector<double> l;
  for (const RequestRecord& rec : records) {
    if (rec.outcome == RequestOutcome::kServed && rec.high_priority == high) l.push_back(rec.latency_ms);
  }
  if (l.empty()) return {0, 0};
  std::sort(l.begin(), l.end());
  return {Percentile(l, 50), Percentile(l, 99)};
}

}  // namespace

RequestOutcome OutcomeOfAcquireError(const Status& error) {
  return error.code() == StatusCode::kUnavailable ? RequestOutcome::kGivenUp
                                                  : RequestOutcome::kDropped;
}

OpenLoopResult Summarize(std::string policy, double load, const std::vector<RequestRecord>& records,
                         double served_span_s) {
  OpenLoopResult r;
  r.policy = std::move(policy);
  r.load = load;
  std::vector<double> latency_ms;
  for (const RequestRecord& rec : records) {
    switch (rec.outcome) {
      case RequestOutcome::kServed:
        latency_ms.push_back(rec.latency_ms);
        break;
      case RequestOutcome::kGivenUp:
        ++r.given_up;
        break;
      case RequestOutcome::kDropped:
        ++r.dropped;
        break;
    }
  }
  r.served = static_cast<int>(latency_ms.size());
  for (const RequestRecord& rec : records) {
    if (rec.outcome == RequestOutcome::kServed && rec.model_loaded) ++r.model_loads;
  }
  std::tie(r.high_p50_ms, r.high_p99_ms) = ClassPercentiles(records, true);
  std::tie(r.low_p50_ms, r.low_p99_ms) = ClassPercentiles(records, false);
  if (latency_ms.empty()) return r;
  std::sort(latency_ms.begin(), latency_ms.end());
  r.p50_ms = Percentile(latency_ms, 50);
  r.p99_ms = Percentile(latency_ms, 99);
  r.p999_ms = Percentile(latency_ms, 99.9);
  double sum = 0;
  for (double l : latency_ms) sum += l;
  r.mean_ms = sum / static_cast<double>(latency_ms.size());
  if (served_span_s > 0) r.throughput_per_s = r.served / served_span_s;
  return r;
}

void PreciseWaitUntilNs(const RealClock& clock, int64_t deadline_ns) {
  constexpr int64_t kSpinNs = 100'000;  // more than a sleep's usual overshoot
  for (int64_t left = deadline_ns - clock.NowNs(); left > 0; left = deadline_ns - clock.NowNs()) {
    if (left > kSpinNs) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(left - kSpinNs));
    } else {
      std::this_thread::yield();
    }
  }
}

std::vector<std::unique_ptr<SimDevice>> MakeBenchDevices(int gpus, int streams, RealClock& clock) {
  std::vector<std::unique_ptr<SimDevice>> devices;
  for (int g = 0; g < gpus; ++g) {
    devices.push_back(std::make_unique<SimDevice>(
        SimDeviceOptions{.index = g, .name = "", .memory_mib = 1024, .streams = streams}, clock,
        [&clock](int64_t ns) { PreciseWaitUntilNs(clock, clock.NowNs() + ns); }));
  }
  return devices;
}

std::vector<ServiceConfig> BenchServiceConfigs(const OpenLoopConfig& config) {
  std::vector<ServiceConfig> out;
  for (const auto& s : config.services) {
    const auto cost = static_cast<DurationMs>(std::llround(s.mean_ms));
    out.push_back({s.name, s.mean_ms, cost / 2, std::max<DurationMs>(1, cost / 10)});
  }
  return out;
}

OpenLoopResult RunOpenLoop(DispatchPolicy& policy, std::vector<SimDevice*> devices,
                           const OpenLoopConfig& config, RealClock& clock, Rng& rng) {
  const std::vector<Request> requests = MakeRequests(config, rng);
  std::vector<RequestRecord> records(requests.size());  // kDropped until a worker says otherwise
  std::atomic<int> in_flight{0};
  std::atomic<int64_t> last_served_ns{0};
  GpuModels models(config.gpus);
  const int64_t start_ns = clock.NowNs();
  {
    WorkPool pool(static_cast<size_t>(config.worker_threads));
    // Each request is released at its arrival time, to within a few µs. Latency counts from
    // the scheduled arrival, so any lateness (a busy machine) is still charged.
    for (size_t next = 0; next < requests.size(); ++next) {
      PreciseWaitUntilNs(clock, start_ns + requests[next].arrival_ns);
      if (config.max_in_flight > 0 && in_flight.load() >= config.max_in_flight) continue;
      in_flight.fetch_add(1);
      pool.Post([&, i = next] {
        records[i] = Serve(policy, devices, requests[i], config, models, clock);
        const int64_t end = clock.NowNs();
        records[i].latency_ms = static_cast<double>(end - start_ns - requests[i].arrival_ns) / 1e6;
        if (records[i].outcome == RequestOutcome::kServed) {
          int64_t prev = last_served_ns.load();
          while (prev < end && !last_served_ns.compare_exchange_weak(prev, end)) {}
        }
        in_flight.fetch_sub(1);
      });
    }
  }  // the pool drains and joins here
  const int64_t last = last_served_ns.load();
  return Summarize(std::string(policy.name()), config.load, records,
                   last > start_ns ? static_cast<double>(last - start_ns) / 1e9 : 0);
}

namespace {

// ns per call of `decide(thread, i)` with `threads` threads calling it at once.
template <typename Decide>
double NsPerDecision(Clock& clock, int threads, int decisions_per_thread, Decide decide) {
  const int64_t start = clock.NowNs();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < decisions_per_thread; ++i) decide(t, i);
    });
  }
  for (auto& w : workers) w.join();
  const double total = static_cast<double>(threads) * decisions_per_thread;
  return static_cast<double>(clock.NowNs() - start) * threads / total;
}

const std::vector<ServiceConfig> kOverheadServices = {{"a", 10, 5, 1}, {"b", 30, 15, 3}};

}  // namespace

double MeasureDecisionOverheadNs(Clock& clock, int gpus, int threads, int decisions_per_thread) {
  DispatcherConfig c;
  c.gpu_count = gpus;
  c.services = kOverheadServices;
  auto d = std::move(RealtimeDispatcher::Create(c, clock)).value();
  return NsPerDecision(clock, threads, decisions_per_thread, [&](int t, int i) {
    std::optional<Lease> l = d->TryAcquire((i + t) % 2, 5);
    if (l) d->Complete(*l);
  });
}

double MeasureGpuschedOverheadNs(Clock& clock, int gpus, int threads, int decisions_per_thread) {
  GpuschedConfig c;
  c.gpu_count = gpus;
  c.services = kOverheadServices;
  auto p = std::move(GpuschedPolicy::Create(c, clock)).value();
  return NsPerDecision(clock, threads, decisions_per_thread, [&](int t, int i) {
    StatusOr<Lease> l = p->Acquire((i + t) % 2);
    if (l.ok()) p->Complete(*l);
  });
}

}  // namespace gpusched::dispatch
