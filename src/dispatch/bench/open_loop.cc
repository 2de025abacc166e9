#include "dispatch/bench/open_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "base/percentile.h"
#include "dispatch/realtime_dispatcher.h"
#include "base/work_pool.h"

namespace gpusched::dispatch {
namespace {

struct Request {
  int64_t arrival_ns;  // offset from the start
  int service;
  double work_ms;
};

std::vector<Request> MakeRequests(const OpenLoopConfig& c, Rng& rng) {
  double mean_work = 0;
  for (const auto& s : c.services) mean_work += s.share * s.mean_ms;
  const double rate_per_ms = c.load * c.gpus / mean_work;
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
    out.push_back({static_cast<int64_t>(t_ms * 1e6), s, rng.LogNormal(mu, b.sigma)});
  }
  return out;
}

// One request: a GPU from the policy, a stream on it, the compute, release both.
void Serve(DispatchPolicy& policy, std::vector<SimDevice*>& devices, const Request& r,
           RealClock& clock) {
  StatusOr<Lease> lease = policy.Acquire(r.service);
  if (!lease.ok()) return;
  SimDevice& dev = *devices[lease->gpu];
  StatusOr<StreamId> stream = dev.AcquireStream();
  while (!stream.ok()) {  // every stream busy: the request queues on the GPU (polls every 50 µs)
    PreciseWaitUntilNs(clock, clock.NowNs() + 50'000);
    stream = dev.AcquireStream();
  }
  (void)dev.Launch(*stream, [&dev, ms = r.work_ms](const KernelContext&) { dev.ComputeMs(ms); });
  (void)dev.Synchronize(*stream);
  (void)dev.ReleaseStream(*stream);
  policy.Complete(*lease);
}

}  // namespace

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
  std::vector<double> latency_ms(requests.size());
  std::atomic<int> done{0};
  std::atomic<int64_t> last_done_ns{0};
  const int64_t start_ns = clock.NowNs();
  {
    WorkPool pool(static_cast<size_t>(config.worker_threads));
    // Each request is released at its arrival time, to within a few µs. Latency counts from
    // the scheduled arrival, so any lateness (a busy machine) is still charged.
    for (size_t next = 0; next < requests.size(); ++next) {
      PreciseWaitUntilNs(clock, start_ns + requests[next].arrival_ns);
      pool.Post([&, i = next] {
        Serve(policy, devices, requests[i], clock);
        const int64_t end = clock.NowNs();
        latency_ms[i] = static_cast<double>(end - start_ns - requests[i].arrival_ns) / 1e6;
        int64_t prev = last_done_ns.load();
        while (prev < end && !last_done_ns.compare_exchange_weak(prev, end)) {}
        done.fetch_add(1);
      });
    }
  }  // the pool drains and joins here
  OpenLoopResult r;
  r.policy = std::string(policy.name());
  r.load = config.load;
  std::sort(latency_ms.begin(), latency_ms.end());
  r.p50_ms = Percentile(latency_ms, 50);
  r.p99_ms = Percentile(latency_ms, 99);
  r.p999_ms = Percentile(latency_ms, 99.9);
  double sum = 0;
  for (double l : latency_ms) sum += l;
  r.mean_ms = sum / static_cast<double>(latency_ms.size());
  r.throughput_per_s =
      done.load() / (static_cast<double>(last_done_ns.load() - start_ns) / 1e9);
  return r;
}

double MeasureDecisionOverheadNs(Clock& clock, int gpus, int threads, int decisions_per_thread) {
  DispatcherConfig c;
  c.gpu_count = gpus;
  c.services = {{"a", 10, 5, 1}, {"b", 30, 15, 3}};
  auto d = std::move(RealtimeDispatcher::Create(c, clock)).value();
  const int64_t start = clock.NowNs();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < decisions_per_thread; ++i) {
        const int service = (i + t) % 2;
        std::optional<Lease> l = d->TryAcquire(service, 5);
        if (l) d->Complete(*l);
      }
    });
  }
  for (auto& w : workers) w.join();
  const double total = static_cast<double>(threads) * decisions_per_thread;
  return static_cast<double>(clock.NowNs() - start) * threads / total;
}

}  // namespace gpusched::dispatch
