// `gpusched bench dispatch [--json]`: the CN113051059B dispatcher (defaults, and patent-eft with
// the earliest-finish scan and max fin_time options) against round-robin, random,
// join-shortest-queue and least-expected-finish-time, under open-loop load on 8 simulated GPUs.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "cli/commands.h"
#include "dispatch/baseline_policies.h"
#include "dispatch/bench/open_loop.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/sim_device.h"

namespace gpusched::cli {
namespace {

using namespace gpusched::dispatch;

struct Options {
  bool json = false;
  int requests = 2000;
  uint64_t seed = 1;
};

std::unique_ptr<DispatchPolicy> MakePolicy(const std::string& name, const OpenLoopConfig& c,
                                           Clock& clock, Rng& rng) {
  const std::vector<ServiceConfig> services = BenchServiceConfigs(c);
  if (name == "patent" || name == "patent-eft") {
    DispatcherConfig dc;
    dc.gpu_count = c.gpus;
    dc.services = services;
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

void Run(const Options& o) {
  RealClock clock;
  // patent-eft is PATENTS.md section 1's pair of options (earliest-finish scan, max fin_time)
  // on the same dispatcher: the row that shows how much of a gap to the baselines they close.
  const std::vector<std::string> policies = {"patent", "patent-eft", "round-robin", "random",
                                             "jsq", "left"};
  const double overhead_1 = MeasureDecisionOverheadNs(clock, 8, 1, 200000);
  const double overhead_2 = MeasureDecisionOverheadNs(clock, 8, 2, 100000);
  std::vector<OpenLoopResult> rows;
  for (double load : {0.5, 0.8, 0.95}) {
    for (const std::string& p : policies) {
      OpenLoopConfig c;
      c.load = load;
      c.requests = o.requests;
      const std::vector<std::unique_ptr<SimDevice>> owned =
          MakeBenchDevices(c.gpus, c.streams_per_gpu, clock);
      std::vector<SimDevice*> devices;
      for (const auto& d : owned) devices.push_back(d.get());
      Rng policy_rng(o.seed + 1000), load_rng(o.seed);  // same arrivals for every policy
      std::unique_ptr<DispatchPolicy> policy = MakePolicy(p, c, clock, policy_rng);
      rows.push_back(RunOpenLoop(*policy, devices, c, clock, load_rng));
      rows.back().policy = p;  // the variant's label, not the class's name
      if (!o.json) {
        const OpenLoopResult& r = rows.back();
        std::printf("%-12s load %3.0f%%  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  mean %7.2f ms"
                    "  %7.1f req/s\n",
                    r.policy.c_str(), r.load * 100, r.p50_ms, r.p99_ms, r.p999_ms, r.mean_ms,
                    r.throughput_per_s);
        std::fflush(stdout);
      }
    }
  }
  if (o.json) {
    std::printf("{\"seed\": %llu, \"requests\": %d, \"gpus\": 8, \"overhead_ns_per_decision\": %.1f,"
                " \"overhead_ns_per_decision_2_threads\": %.1f, \"rows\": [",
                static_cast<unsigned long long>(o.seed), o.requests, overhead_1, overhead_2);
    for (size_t i = 0; i < rows.size(); ++i) {
      const OpenLoopResult& r = rows[i];
      std::printf("%s\n  {\"policy\": \"%s\", \"load\": %.2f, \"p50_ms\": %.3f, \"p99_ms\": %.3f,"
                  " \"p999_ms\": %.3f, \"mean_ms\": %.3f, \"throughput_per_s\": %.1f}",
                  i ? "," : "", r.policy.c_str(), r.load, r.p50_ms, r.p99_ms, r.p999_ms,
                  r.mean_ms, r.throughput_per_s);
    }
    std::printf("\n]}\n");
  } else {
    std::printf("dispatcher overhead: %.0f ns per decision (1 thread), %.0f ns (2 threads)\n",
                overhead_1, overhead_2);
    std::printf("seed %llu, %d requests per row, 8 simulated GPUs, services small (6 ms) and "
                "large (18 ms), lognormal sigma 0.6\n",
                static_cast<unsigned long long>(o.seed), o.requests);
  }
}

}  // namespace

void RegisterBenchDispatch(CLI::App& bench) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "dispatch", "CN113051059B dispatcher vs baselines under open-loop load on 8 simulated GPUs");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->add_option("--requests", opts->requests, "Requests per (policy, load) row")
      ->check(CLI::Range(100, 1000000));
  cmd->add_option("--seed", opts->seed, "Seed of the arrivals and service times");
  cmd->callback([opts] { Run(*opts); });
}

}  // namespace gpusched::cli
