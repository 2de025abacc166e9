#pragma once
// The open-loop load generator behind `gpusched bench dispatch`: Poisson arrivals of two
// services with lognormal service times, run for real on SimDevices (processor-shared compute)
// through any DispatchPolicy, on a real clock. Open loop: requests arrive on schedule whether
// or not earlier ones finished, and latency counts from the scheduled arrival. Only served
// requests have a latency: one the policy gave up on or the generator dropped is counted as
// such and kept out of the percentiles.
//
// A benchmark, not a test: its numbers depend on the machine and are never asserted.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/realtime_config.h"
#include "dispatch/sim_device.h"

namespace gpusched::dispatch {

struct BenchService {
  std::string name;
  double mean_ms;  // mean service time on an otherwise idle GPU
  double sigma;    // lognormal shape
  double share;    // fraction of requests
};

struct OpenLoopConfig {
  int gpus = 8;
  double load = 0.8;  // offered GPU time / available GPU time
  int requests = 2000;
  int streams_per_gpu = 64;
  int worker_threads = 256;  // requests that may be in flight (waiting or running) at once
  // A request that arrives while this many are in flight is dropped (load shedding); 0: none
  // is dropped, the extra ones queue for a worker thread (and that wait counts as latency).
  int max_in_flight = 0;
  std::vector<BenchService> services = {{"small", 6, 0.6, 0.5}, {"large", 18, 0.6, 0.5}};
  // How much of a request's run time is known when it arrives, as a model server knows it
  // from the input's size: the fraction f of the lognormal's log-variance. A request's work is
  // exp(mu + sigma (sqrt(f) Z1 + sqrt(1 - f) Z2)); its hint is the expected work given Z1,
  // passed as AcquireOptions::expected_ms to the policies that take it (the gpusched policy).
  // f = 0: every hint is the service's mean (nothing is known beyond the service); the run
  // times have the same distribution for every f.
  double known_fraction = 0;
  // Issue 42 item 5 scenarios (`gpusched bench dispatch --scenario`). Each GPU's time
  // multiplier (2: twice as slow; empty: all 1); the load counts the GPUs' summed speed.
  std::vector<double> gpu_speed;
  // models > 0: each request serves one of that many models (uniform); a GPU holds one model
  // at a time and a request whose model is not the one loaded there first loads it, adding
  // model_load_ms to its work.
  int models = 0;
  double model_load_ms = 0;
  // Fraction of requests of high priority (1; the rest 0).
  double high_priority_share = 0;
  // Whether the policy is told each request's model and priority (the gpusched policy).
  bool pass_placement_inputs = false;
};

// How one request of the load ended.
enum class RequestOutcome {
  kServed,   // granted a GPU and run to the end
  kGivenUp,  // the policy refused it after waiting (Acquire: Unavailable, its acquire_timeout)
  kDropped,  // never run: it arrived with max_in_flight requests in flight, or Acquire failed
             // for any other reason (shutdown, an error)
};

struct RequestRecord {
  RequestOutcome outcome = RequestOutcome::kDropped;
  double latency_ms = 0;  // scheduled arrival -> done; meaningful for kServed only
  bool high_priority = false;
  bool model_loaded = false;  // it paid model_load_ms
};

struct OpenLoopResult {
  std::string policy;
  double load = 0;
  int served = 0, given_up = 0, dropped = 0;
  // Over served requests only; 0 when none was served.
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, mean_ms = 0;
  double throughput_per_s = 0;  // served requests / (last one served - start)
  // Issue 42 scenarios: served requests that loaded their model; latencies by priority.
  int model_loads = 0;
  double high_p50_ms = 0, high_p99_ms = 0, low_p50_ms = 0, low_p99_ms = 0;
};

// The outcome of a request whose Acquire returned `error` (not ok).
RequestOutcome OutcomeOfAcquireError(const Status& error);

// Counts each outcome and takes latency percentiles (nearest rank) and the mean over the
// served requests only. `served_span_s`: start to the end of the last served request.
OpenLoopResult Summarize(std::string policy, double load, const std::vector<RequestRecord>& records,
                         double served_span_s);

// A wait of `ns` on the real clock, precise to a few µs: it sleeps until ~100 µs before the
// deadline, then spins. Clock::SleepMs has whole-ms steps and a plain sleep overshoots by
// 50-100 µs, which would add about a ms to every latency, as much as policies differ by.
void PreciseWaitUntilNs(const RealClock& clock, int64_t deadline_ns);

// `gpus` simulated GPUs for the bench: `streams` streams each, and kernels that end exactly
// when their processor-shared work is done (SimDevice's wait_ns is a precise real wait).
std::vector<std::unique_ptr<SimDevice>> MakeBenchDevices(int gpus, int streams, RealClock& clock);

// The ServiceConfigs the policies get: cost_time = the service's mean (an offline table),
// wait_time = cost/2, try_time = max(1, cost/10), the proportions of PATENTS.md's example.
std::vector<ServiceConfig> BenchServiceConfigs(const OpenLoopConfig& config);

// Runs `config.requests` requests through `policy` on `devices` (one per GPU). Requests are
// released at their arrival times to within a few µs (PreciseWaitUntilNs), so latency measures
// the policy's queueing and the device's sharing, not the load generator's timer.
OpenLoopResult RunOpenLoop(DispatchPolicy& policy, std::vector<SimDevice*> devices,
                           const OpenLoopConfig& config, RealClock& clock, Rng& rng);

// The dispatcher's own cost: ns per TryAcquire + Complete pair on `gpus` GPUs, `threads`
// threads hammering one RealtimeDispatcher with the given clock.
double MeasureDecisionOverheadNs(Clock& clock, int gpus, int threads, int decisions_per_thread);
// The same for GpuschedPolicy: ns per Acquire + Complete pair.
double MeasureGpuschedOverheadNs(Clock& clock, int gpus, int threads, int decisions_per_thread);

}  // namespace gpusched::dispatch
