// `gpusched sim`: replay a trace (or a synthetic workload) through core::Scheduler on a
// simulated clock and report JCT, waiting time, makespan, utilisation and fragmentation
// (DESIGN.md "The command line" and "Simulator"; the semantics are in src/sim/README.md).

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "base/clock.h"
#include "base/rng.h"
#include "core/quota.h"
#include "server/server_config.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "sim/cluster_spec.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/synthetic.h"
#include "sim/trace.h"

namespace gpusched::cli {
namespace {

struct SimFlags {
  std::string trace, format = "csv", cluster, nodes, policy = "gpusched", placement = "gpusched";
  std::string out, config;
  bool json = false, skip_bad_lines = false, allocation_replay = false, no_progress = false;
  int64_t synthetic_jobs = 0;
  double arrivals_per_hour = 30;
  std::optional<uint64_t> seed;
  std::vector<double> las_thresholds_gpu_h;
  double promote_knob = 0;
  std::vector<std::string> quotas;  // TEAM=GPUS[:BORROW]
  std::vector<std::string> priorities;  // VC=CLASS
  bool no_gangs = false;
  bool no_gang_reservation = false;
  bool wide_reservation = false;
  bool by_team = false;
};

// The `queue_order:` value of a core order (server/server_config.cc's names).
const char* QueueOrderConfigName(core::QueueOrder order) {
  switch (order) {
    case core::QueueOrder::kPriority: return "priority";
    case core::QueueOrder::kSubmission: return "fifo";
    case core::QueueOrder::kShortestDuration: return "sjf";
    case core::QueueOrder::kShortestRemaining: return "srtf";
    case core::QueueOrder::kLeastAttained: return "las";
    case core::QueueOrder::kTwoDimLas: return "dlas";
  }
  return "unknown";
}

// A one-line progress bar on stderr, only when stderr is a terminal.
std::function<void(size_t, size_t)> ProgressBar(bool enabled) {
  if (!enabled || isatty(STDERR_FILENO) == 0) return {};
  return [](size_t done, size_t total) {
    const int width = 40;
    const int filled = total == 0 ? width : static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%s%s] %3d%% %zu/%zu jobs", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(),
                 total == 0 ? 100 : static_cast<int>(100 * done / total), done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
}

// --out is made before the run: a path that cannot be a directory fails in a moment, not
// after the whole replay.
void PrepareOutDir(const std::string& out) {
  if (out.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out)) {
    Fail("out: cannot create the directory " + out + ": " +
             (ec ? ec.message() : std::string("a file of that name exists")),
         kExitFailure);
  }
}

// `--config FILE`: the scheduler keys of `gpusched server --config` (issue 37), read by the
// server's own parser, so a figure of the simulator is one of the server's configuration.
void ApplyServerConfig(const std::string& path, sim::SimOptions& options, sim::RunInfo& info) {
  server::ServerConfig c;
  Status s = server::ApplyConfigFile(path, c);
  if (!s.ok()) Fail(s.message(), kExitUsage);
  options.config = c.scheduler;
  info.policy = std::string("queue_order ") + QueueOrderConfigName(c.scheduler.queue_order.order) +
                " (--config " + path + ")";
  info.placement = "from --config";
}

// The jobs to replay: a synthetic workload (--synthetic N) or the --trace file.
sim::Trace LoadSimTrace(const SimFlags& f, sim::RunInfo& info) {
  if (f.synthetic_jobs > 0) {
    Rng rng(f.seed.value_or(Rng::FreshSeed()));
    std::cerr << "gpusched sim: synthetic workload, " << f.synthetic_jobs << " jobs, seed "
              << rng.seed() << "\n";
    sim::Trace trace = sim::GenerateSyntheticTrace({f.synthetic_jobs, f.arrivals_per_hour}, rng);
    info.synthetic = true;
    info.seed = rng.seed();
    info.trace = "synthetic";
    info.format = "synthetic";
    return trace;
  }
  if (f.trace.empty()) Fail("--trace FILE is required (or --synthetic N)", kExitUsage);
  const sim::TraceFormat format = OrFail(sim::ParseTraceFormat(f.format));
  StatusOr<sim::Trace> loaded = sim::LoadTrace(f.trace, format, {f.skip_bad_lines});
  if (!loaded.ok() && format != sim::TraceFormat::kCsv &&
      sim::LoadTrace(f.trace, sim::TraceFormat::kCsv, {}).ok()) {
    Fail(loaded.status().message() + " (the file reads as a plain CSV trace: use --format csv)",
         kExitUsage);
  }
  sim::Trace trace = OrFail(std::move(loaded), kExitUsage);  // a missing or unreadable file too
  info.trace = f.trace;
  info.format = f.format;
  info.skipped_lines = trace.skipped_lines;
  if (trace.skipped_lines > 0) {
    std::cerr << "gpusched sim: skipped " << trace.skipped_lines
              << " bad lines; the first: " << trace.first_skipped_error << "\n";
  }
  return trace;
}

// The simulated nodes: the --nodes list, else the uniform --cluster (default 100x8).
std::vector<core::NodeSpec> SimNodes(const SimFlags& f, sim::RunInfo& info) {
  if (!f.nodes.empty()) {
    info.cluster = f.nodes;
    return OrFail(sim::LoadNodeList(f.nodes), kExitUsage);
  }
  info.cluster = f.cluster.empty() ? "100x8" : f.cluster;
  return OrFail(sim::ParseClusterSpec(info.cluster));
}

sim::SimOptions SimOptionsFrom(const SimFlags& f, sim::RunInfo& info) {
  sim::SimOptions options;
  options.policy = OrFail(sim::ParsePolicy(f.policy));
  options.placement = OrFail(sim::ParsePlacementPolicy(f.placement));
  for (double h : f.las_thresholds_gpu_h) {
    options.las_thresholds_gpu_ms.push_back(std::llround(h * 3'600'000.0));
  }
  if (f.promote_knob != 0 && options.policy != sim::Policy::kDlas) {
    Fail("--promote-knob applies to --policy dlas only", kExitUsage);
  }
  options.promote_knob = f.promote_knob;
  for (const std::string& q : f.quotas) options.quotas.push_back(OrFail(core::ParseTeamQuota(q)));
  for (const std::string& p : f.priorities) {
    auto vc = sim::ParseVcPriority(p, core::SchedulerConfig().priority_classes);
    if (!vc.ok()) Fail(vc.status().message(), kExitUsage);
    options.vc_priority[vc->first] = vc->second;
  }
  options.gangs = !f.no_gangs;
  options.gang_reservation = !f.no_gang_reservation;
  options.wide_task_reservation = f.wide_reservation;
  options.allocation_replay = f.allocation_replay;
  options.progress = ProgressBar(!f.no_progress);
  info.policy = f.policy;
  info.placement = f.placement;
  if (!f.config.empty()) ApplyServerConfig(f.config, options, info);
  return options;
}

// The report on stdout (JSON or the table, with --by-team its per-team lines), then --out.
void ReportSim(const SimFlags& f, const sim::SimResult& result, const sim::RunInfo& info) {
  if (f.json) {
    sim::WriteJson(std::cout, result, info);
  } else {
    sim::WriteSummaryTable(std::cout, result, info);
    if (f.by_team) {
      std::printf("\n%-12s %8s %14s %14s\n", "team (VC)", "jobs", "avg wait s", "avg JCT s");
      for (const sim::TeamSummary& t : sim::SummarizeByTeam(result.jobs)) {
        std::printf("%-12s %8lld %14.1f %14.1f\n", t.team.c_str(), static_cast<long long>(t.jobs),
                    t.avg_wait_s, t.avg_jct_s);
      }
    }
  }
  if (!f.out.empty()) {
    std::string warning;
    Status s = sim::WriteOutputs(f.out, result, info, &warning);
    if (!s.ok()) Fail(s.message(), kExitFailure);
    if (!warning.empty()) std::cerr << "gpusched sim: " << warning << "\n";
  }
}

void RunSim(const SimFlags& f) {
  PrepareOutDir(f.out);
  sim::RunInfo info;
  const sim::Trace trace = LoadSimTrace(f, info);
  const std::vector<core::NodeSpec> nodes = SimNodes(f, info);
  const sim::SimOptions options = SimOptionsFrom(f, info);

  // The real clock times the replay itself, for the report only; the replay runs on its own
  // simulated clock.
  RealClock wall;
  const int64_t started_ns = wall.NowNs();
  const sim::SimResult result = OrFail(sim::RunSimulation(trace, nodes, options));
  info.wall_s = static_cast<double>(wall.NowNs() - started_ns) / 1e9;
  ReportSim(f, result, info);
}

// --trace, --format, --cluster, --nodes: what is replayed on what.
void AddSimInputFlags(CLI::App* cmd, SimFlags& f) {
  cmd->add_option("--trace", f.trace, "Trace file");
  cmd->add_option("--format", f.format, "csv | philly | philly-rfold | alibaba")
      ->capture_default_str();
  cmd->add_option("--cluster", f.cluster, "Uniform cluster NxG[xMEM] (default 100x8)");
  cmd->add_option("--nodes", f.nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->excludes("--cluster");
}

// --policy, --placement and --config (which replaces both); returns --config's option.
CLI::Option* AddSimPolicyFlags(CLI::App* cmd, SimFlags& f) {
  cmd->add_option("--policy", f.policy,
                  "gpusched | fifo | fifo-backfill | sjf | srtf | las | dlas (Tiresias 2D-LAS) | "
                  "fairshare (gpusched plus fair share between the trace's virtual clusters)")
      ->capture_default_str();
  cmd->add_option("--placement", f.placement,
                  "Node/GPU choice: gpusched | best-fit | worst-fit | min-fragmentation | fgd")
      ->capture_default_str();
  return cmd->add_option(
      "--config", f.config,
      "Server config file (gpusched server --config): its scheduler keys (queue_order, "
      "las_thresholds, dlas_thresholds, dlas_promote_knob, order_quantum, t2, capacity_wait, "
      "placement...) replace --policy and --placement");
}

// --out through --no-progress: outputs, the FGD experiment, LAS and the synthetic workload.
void AddSimRunFlags(CLI::App* cmd, SimFlags& f) {
  cmd->add_option("--out", f.out, "Directory for summary.json, CSV files and PNG plots");
  cmd->add_flag("--json", f.json, "Print one JSON object instead of the table");
  cmd->add_flag("--skip-bad-lines", f.skip_bad_lines, "Skip and count unparsable trace lines");
  cmd->add_flag("--allocation-replay", f.allocation_replay,
                "FGD (ATC'23) experiment: pods arrive, none leaves; allocation rate and "
                "unallocated GPUs");
  cmd->add_option("--las-thresholds", f.las_thresholds_gpu_h,
                  "LAS queue thresholds in GPU-hours, ascending (las default 1 10; dlas default "
                  "3250 and 7200 GPU-seconds)");
  cmd->add_option("--promote-knob", f.promote_knob,
                  "dlas starvation rule (Tiresias PROMOTEKNOB): a suspended job that waited "
                  "knob x its executed time returns to queue 0; 0 = off")
      ->capture_default_str();
  cmd->add_option("--synthetic", f.synthetic_jobs, "Generate N Philly-like jobs instead of --trace")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}))
      ->excludes("--trace");
  cmd->add_option("--arrivals-per-hour", f.arrivals_per_hour, "Synthetic arrival rate")
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "Seed of the synthetic workload (printed)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress bar");
}

// --priority through --by-team: virtual clusters' classes, gangs, reservations, quotas.
void AddSimClusterRuleFlags(CLI::App* cmd, SimFlags& f) {
  cmd->add_option("--priority", f.priorities,
                  "Priority class of a virtual cluster VC=CLASS (high | normal | low; "
                  "repeatable): a higher class may preempt a lower one");
  cmd->add_flag("--no-gangs", f.no_gangs,
                "Refuse jobs wider than a node instead of running them as multi-node gangs");
  cmd->add_flag("--no-gang-reservation", f.no_gang_reservation,
                "Gangs reserve no nodes: they start when enough nodes happen to be free");
  cmd->add_flag("--wide-reservation", f.wide_reservation,
                "As the server: the first waiting task of more than one GPU reserves GPUs, and "
                "only tasks whose time limit ends before its start backfill (trace jobs have "
                "none, so none does)");
  cmd->add_option("--quota", f.quotas,
                  "Team quota TEAM=GPUS[:BORROW] (BORROW a count or unlimited; teams are the "
                  "trace's virtual clusters); repeatable");
  cmd->add_flag("--by-team", f.by_team,
                "Also print average wait and JCT per team (the trace's virtual cluster)");
}

}  // namespace

void RegisterSim(CLI::App& app) {
  auto* cmd = app.add_subcommand("sim", "Replay a GPU cluster trace through the scheduler core");
  auto f = std::make_shared<SimFlags>();
  AddSimInputFlags(cmd, *f);
  CLI::Option* config = AddSimPolicyFlags(cmd, *f);
  AddSimRunFlags(cmd, *f);
  AddSimClusterRuleFlags(cmd, *f);
  for (const char* flag : {"--policy", "--placement", "--las-thresholds", "--promote-knob"}) {
    config->excludes(cmd->get_option(flag));
  }
  cmd->callback([f] { RunSim(*f); });
}

}  // namespace gpusched::cli
