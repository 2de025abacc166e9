#pragma once
// Each subcommand of the `gpusched` binary lives in its own file and registers itself on
// the CLI11 app through one of these functions. main.cc calls them.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace gpusched::cli {

// `gpusched bench core`: placement decisions per second (bench/core_bench.cc).
void RegisterBenchCore(CLI::App& bench);  // also registers `bench filter`
void RegisterBenchFilter(CLI::App& bench);
void RegisterBenchWaiting(CLI::App& bench);  // registered by RegisterBenchCore
// `gpusched bench dispatch`: the CN113051059B dispatcher under open-loop load.
void RegisterBenchDispatch(CLI::App& bench);
// `gpusched bench chunks`: the CN110955526B chunk scheduler.
void RegisterBenchChunks(CLI::App& bench);
// `gpusched sim`: trace replay through core::Scheduler.
void RegisterSim(CLI::App& app);
// `gpusched demo`: the README's main job.
void RegisterDemo(CLI::App& app);
// Client commands: submit, ls, show, logs, cancel, why (task_commands.cc).
void RegisterTaskCommands(CLI::App& app);
// `gpusched submit` (submit_command.cc); RegisterTaskCommands registers it first.
void RegisterSubmit(CLI::App& app);
// nodes, cordon, uncordon, drain (node_commands.cc).
void RegisterNodeCommands(CLI::App& app);
// token create, ls, revoke (token_commands.cc).
void RegisterTokenCommands(CLI::App& app);
// quota set | quota ls | acct
void RegisterQuotaCommands(CLI::App& app);
// server, agent, dev (daemon_commands.cc).
void RegisterDaemons(CLI::App& app);
// `gpusched admin backup | admin restore` (admin_commands.cc).
void RegisterAdminCommands(CLI::App& app);
// `gpusched certs init`: CA, server and agent key pairs for TLS (certs_command.cc).
void RegisterCerts(CLI::App& app);
// `gpusched bench e2e`: the control plane end to end on loopback.
void RegisterBenchE2e(CLI::App& bench);
// `gpusched bench scale`: many simulated agents and one server (issue 43).
void RegisterBenchScale(CLI::App& bench);
// `gpusched bench utilization`: release -> start of a waiting task, GPU idle meanwhile.
void RegisterBenchUtilization(CLI::App& bench);
// `gpusched bench chaos`: kill -9 of the server or agents under load; nothing lost or doubled.
void RegisterBenchChaos(CLI::App& bench);
// `gpusched bench soak`: noop tasks through the real server and store; the server's memory.
void RegisterBenchSoak(CLI::App& bench);
// `gpusched extender`: kube-scheduler extender (extender_command.cc).
void RegisterExtender(CLI::App& app);
// `gpusched bench extender`: its filter and prioritize latency in both modes.
void RegisterBenchExtender(CLI::App& bench);

// status, ha-demo and `bench failover`: the highly available control plane (ha_commands.cc).
void RegisterHaCommands(CLI::App& app, CLI::App& bench);
// `gpusched dev --ha`: a local HA cluster until SIGINT/SIGTERM (ha_commands.cc).
void RunDevHa(int agents, const std::string& gpus, const std::string& executor,
              int64_t lease_ttl_s);

// Exit codes scripts can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the command ran and reports failure
inline constexpr int kExitUsage = 2;        // bad flags or input
inline constexpr int kExitUnavailable = 3;  // the server could not be reached
inline constexpr int kExitDenied = 4;       // not authenticated, or not allowed

}  // namespace gpusched::cli
