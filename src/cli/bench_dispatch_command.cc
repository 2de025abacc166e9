// `gpusched bench dispatch [--json]`: the gpusched policy and the CN113051059B dispatcher
// (defaults, and patent-eft with the earliest-finish scan and max fin_time options) against
// round-robin, random, join-shortest-queue and least-expected-finish-time, under open-loop load
// on 8 simulated GPUs. Each row counts served, given-up and dropped requests; latencies are
// over served requests only. `--scenario` (issue 42 item 5) runs one of heterogeneous GPUs, two
// models or mixed priorities instead, with the gpusched policy told the new inputs, the same
// policy blind to them, join-shortest-queue and, where it can run it, the literal policy.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "cli/commands.h"
#include "dispatch/baseline_policies.h"
#include "dispatch/bench/open_loop.h"
#include "dispatch/gpusched_policy.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/sim_device.h"

namespace gpusched::cli {
namespace {

using namespace gpusched::dispatch;

// patent-eft is PATENTS.md section 1's pair of options (earliest-finish scan, max fin_time) on
// the literal dispatcher: the row that shows how much of a gap to the baselines they close.
const std::vector<std::string> kPolicies = {"gpusched", "patent", "patent-eft", "round-robin",
                                            "random",   "jsq",    "left"};

struct Options {
  bool json = false;
  int requests = 2000;
  uint64_t seed = 1;
  std::vector<std::string> policies = kPolicies;
  std::vector<double> loads = {0.5, 0.8, 0.95};
  int max_per_gpu = 0;         // gpusched and patent policies
  int64_t acquire_timeout = 0;  // gpusched and patent policies, ms
  int max_in_flight = 0;       // the load generator's shedding
  double known_fraction = 0;   // of each request's run time, known at arrival (a hint)
  GpuschedConfig gpusched;     // its remaining-work model options
  std::string scenario;        // "": the policies above; else kScenarios
};

// Issue 42 item 5. "gpusched-blind" is the gpusched policy without the scenario's input (no
// speed learning, no model, no priority); "gpusched-known" is given the true GPU speeds at
// create and learns none (heterogeneous only), to show what learning them costs. The literal policy runs what needs no new request
// input (it refuses model and priority keys; the heterogeneous GPUs need none).
const std::vector<std::string> kScenarios = {"heterogeneous", "models", "priorities"};

std::vector<std::string> ScenarioPolicies(const std::string& scenario) {
  if (scenario == "priorities") return {"gpusched", "gpusched-blind", "jsq"};
  if (scenario == "heterogeneous") {
    return {"gpusched", "gpusched-known", "gpusched-blind", "jsq", "patent"};
  }
  return {"gpusched", "gpusched-blind", "jsq", "patent"};
}

// The scenario's load shape and the gpusched options it needs.
void ApplyScenario(const std::string& scenario, const std::string& policy, OpenLoopConfig& c,
                   GpuschedConfig& gc) {
  c.pass_placement_inputs = policy == "gpusched";
  if (scenario == "heterogeneous") {
    // Four GPUs twice as slow, interleaved: GPU order says nothing of speed, so the blind
    // policies' ties by index favour neither kind (slow GPUs last would favour them).
    c.gpu_speed = {2, 1, 2, 1, 2, 1, 2, 1};
    gc.learn_speed = policy == "gpusched";
    if (policy == "gpusched-known") gc.gpu_speed = c.gpu_speed;
  } else if (scenario == "models") {
    c.models = 2;
    c.model_load_ms = 30;
    gc.models_per_gpu = 1;  // as the simulated GPUs: one model at a time
    gc.affinity_margin_ms = 20;
  } else if (scenario == "priorities") {
    c.high_priority_share = 0.2;
    gc.max_per_gpu = 2;  // priorities order waiting requests: let some wait
  }
}

std::unique_ptr<DispatchPolicy> MakePolicy(const std::string& name, const OpenLoopConfig& c,
                                           const Options& o, Clock& clock, Rng& rng) {
  const std::vector<ServiceConfig> services = BenchServiceConfigs(c);
  if (name == "gpusched" || name == "gpusched-blind" || name == "gpusched-known") {
    GpuschedConfig gc = o.gpusched;
    gc.gpu_count = c.gpus;
    gc.services = services;
    gc.max_per_gpu = o.max_per_gpu;
    gc.acquire_timeout = o.acquire_timeout;
    OpenLoopConfig shape;
    ApplyScenario(o.scenario, name, shape, gc);
    return std::move(GpuschedPolicy::Create(gc, clock)).value();
  }
  if (name == "patent" || name == "patent-eft") {
    DispatcherConfig dc;
    dc.gpu_count = c.gpus;
    dc.services = services;
    dc.max_per_gpu = o.max_per_gpu;
    dc.acquire_timeout = o.acquire_timeout;
    if (name == "patent-eft") {
      dc.scan = ScanOrder::kEarliestFinish;
      dc.fin_update = FinTimeUpdate::kMax;
    }
    return std::move(RealtimeDispatcher::Create(dc, clock)).value();
  }
  const BaselineKind kind = name == "round-robin" ? BaselineKind::kRoundRobin
                            : name == "random"    ? BaselineKind::kRandom
                            : name == "jsq"       ? BaselineKind::kJoinShortestQueue
                                                  : BaselineKind::kLeastExpectedFinish;
  return std::make_unique<BaselinePolicy>(kind, c.gpus, services, clock, &rng);
}

void PrintRow(const OpenLoopResult& r, const std::string& scenario) {
  std::printf("%-14s load %3.0f%%  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  mean %7.2f ms"
              "  %7.1f req/s  served %d  given-up %d  dropped %d",
              r.policy.c_str(), r.load * 100, r.p50_ms, r.p99_ms, r.p999_ms, r.mean_ms,
              r.throughput_per_s, r.served, r.given_up, r.dropped);
  if (scenario == "models") std::printf("  model-loads %d", r.model_loads);
  if (scenario == "priorities") {
    std::printf("  high p50 %.2f p99 %.2f ms  low p50 %.2f p99 %.2f ms", r.high_p50_ms,
                r.high_p99_ms, r.low_p50_ms, r.low_p99_ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

void PrintJson(const Options& o, double overhead_1, double overhead_2, double gpusched_1,
               const std::vector<OpenLoopResult>& rows) {
  std::printf("{\"seed\": %llu, \"requests\": %d, \"gpus\": 8, \"max_per_gpu\": %d,"
              " \"acquire_timeout_ms\": %lld, \"max_in_flight\": %d, \"known_fraction\": %.2f,"
              " \"overhead_ns_per_decision\": %.1f, \"overhead_ns_per_decision_2_threads\": %.1f,"
              " \"gpusched_overhead_ns_per_decision\": %.1f, \"scenario\": \"%s\", \"rows\": [",
              static_cast<unsigned long long>(o.seed), o.requests, o.max_per_gpu,
              static_cast<long long>(o.acquire_timeout), o.max_in_flight, o.known_fraction,
              overhead_1, overhead_2,
              gpusched_1, o.scenario.c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpenLoopResult& r = rows[i];
    std::printf("%s\n  {\"policy\": \"%s\", \"load\": %.2f, \"served\": %d, \"given_up\": %d,"
                " \"dropped\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f,"
                " \"mean_ms\": %.3f, \"throughput_per_s\": %.1f, \"model_loads\": %d,"
                " \"high_p50_ms\": %.3f, \"high_p99_ms\": %.3f, \"low_p50_ms\": %.3f,"
                " \"low_p99_ms\": %.3f}",
                i ? "," : "", r.policy.c_str(), r.load, r.served, r.given_up, r.dropped, r.p50_ms,
                r.p99_ms, r.p999_ms, r.mean_ms, r.throughput_per_s, r.model_loads, r.high_p50_ms,
                r.high_p99_ms, r.low_p50_ms, r.low_p99_ms);
  }
  std::printf("\n]}\n");
}

const char* ScenarioText(const std::string& scenario) {
  if (scenario == "heterogeneous") {
    return "GPUs 0, 2, 4, 6 run everything 2x slower (load counts 6 GPUs' worth); gpusched "
           "learns speed factors, gpusched-known is given them, gpusched-blind neither";
  }
  if (scenario == "models") {
    return "two models, uniform; a GPU holds one, loading the other adds 30 ms; gpusched gets "
           "the model key (affinity_margin_ms 20, models_per_gpu 1)";
  }
  return "20 % of requests priority 1, the rest 0; gpusched policies at max_per_gpu 2; the "
         "literal policy refuses priorities, so it has no row";
}

void Run(const Options& o) {
  RealClock clock;
  const double overhead_1 = MeasureDecisionOverheadNs(clock, 8, 1, 200000);
  const double overhead_2 = MeasureDecisionOverheadNs(clock, 8, 2, 100000);
  const double gpusched_1 = MeasureGpuschedOverheadNs(clock, 8, 1, 200000);
  std::vector<OpenLoopResult> rows;
  const std::vector<std::string> policies =
      o.scenario.empty() ? o.policies : ScenarioPolicies(o.scenario);
  for (double load : o.loads) {
    for (const std::string& p : policies) {
      OpenLoopConfig c;
      GpuschedConfig unused;
      ApplyScenario(o.scenario, p, c, unused);
      c.load = load;
      c.requests = o.requests;
      c.max_in_flight = o.max_in_flight;
      c.known_fraction = o.known_fraction;
      const std::vector<std::unique_ptr<SimDevice>> owned =
          MakeBenchDevices(c.gpus, c.streams_per_gpu, clock);
      std::vector<SimDevice*> devices;
      for (const auto& d : owned) devices.push_back(d.get());
      Rng policy_rng(o.seed + 1000), load_rng(o.seed);  // same arrivals for every policy
      std::unique_ptr<DispatchPolicy> policy = MakePolicy(p, c, o, clock, policy_rng);
      rows.push_back(RunOpenLoop(*policy, devices, c, clock, load_rng));
      rows.back().policy = p;  // the variant's label, not the class's name
      if (!o.json) PrintRow(rows.back(), o.scenario);
    }
  }
  if (o.json) {
    PrintJson(o, overhead_1, overhead_2, gpusched_1, rows);
    return;
  }
  std::printf("dispatcher overhead: patent %.0f ns per decision (1 thread), %.0f ns (2 threads);"
              " gpusched %.0f ns (1 thread)\n",
              overhead_1, overhead_2, gpusched_1);
  std::printf("seed %llu, %d requests per row, 8 simulated GPUs, services small (6 ms) and "
              "large (18 ms), lognormal sigma 0.6, %.0f %% of it known at arrival; latency "
              "over served requests only\n",
              static_cast<unsigned long long>(o.seed), o.requests, o.known_fraction * 100);
  if (!o.scenario.empty()) std::printf("scenario %s: %s\n", o.scenario.c_str(), ScenarioText(o.scenario));
}

}  // namespace

void RegisterBenchDispatch(CLI::App& bench) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "dispatch", "Dispatch policies (gpusched, CN113051059B, baselines) under open-loop load on "
                  "8 simulated GPUs");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->add_option("--requests", opts->requests, "Requests per (policy, load) row")
      ->check(CLI::Range(100, 1000000));
  cmd->add_option("--seed", opts->seed, "Seed of the arrivals and service times");
  cmd->add_option("--policy", opts->policies,
                  "Policies to run, repeatable (default: all): gpusched, patent, patent-eft, "
                  "round-robin, random, jsq, left")
      ->check(CLI::IsMember(kPolicies));
  cmd->add_option("--load", opts->loads,
                  "Offered load as a fraction of the GPUs' time, repeatable (default: 0.5 0.8 "
                  "0.95)")
      ->check(CLI::Range(0.01, 2.0));
  cmd->add_option("--max-per-gpu", opts->max_per_gpu,
                  "gpusched and patent policies: leases at once on one GPU (0: no cap)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--acquire-timeout", opts->acquire_timeout,
                  "gpusched and patent policies: give a request up after this many ms without "
                  "a GPU (0: never); counted as given-up")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  cmd->add_option("--known-fraction", opts->known_fraction,
                  "Fraction of each request's run-time variance (log scale) known at arrival "
                  "and passed to the gpusched policy as the request's expected run time "
                  "(0: only the service is known; the run times are drawn alike for any value)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--prior-spread", opts->gpusched.prior_spread,
                  "gpusched policy: log-scale spread of run times around their estimate "
                  "assumed until learned (default 0.6)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_flag("!--fixed-spread", opts->gpusched.learn_spread,
                "gpusched policy: keep --prior-spread instead of learning each service's");
  cmd->add_option("--min-remaining-fraction", opts->gpusched.min_remaining_fraction,
                  "gpusched policy: a running lease is taken to need at least this fraction "
                  "of its expected run time more (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--scenario", opts->scenario,
                  "Issue 42 placement inputs: heterogeneous (GPU speeds), models (affinity), "
                  "priorities; runs gpusched, gpusched-blind, jsq and (where it can) patent")
      ->check(CLI::IsMember(kScenarios));
  cmd->add_option("--max-in-flight", opts->max_in_flight,
                  "Drop a request that arrives while this many are in flight (0: never); "
                  "counted as dropped")
      ->check(CLI::Range(0, 1000000));
  cmd->callback([opts] { Run(*opts); });
}

}  // namespace gpusched::cli
