#pragma once
// Each subcommand of the `gpusched` binary lives in its own file and registers itself on
// the CLI11 app through one of these functions. main.cc calls them.

#include <CLI/CLI.hpp>

namespace gpusched::cli {

// `gpusched bench core`: placement decisions per second (bench/core_bench.cc).
void RegisterBenchCore(CLI::App& bench);
// `gpusched bench dispatch`: the CN113051059B dispatcher under open-loop load.
void RegisterBenchDispatch(CLI::App& bench);
// `gpusched bench chunks`: the CN110955526B chunk scheduler.
void RegisterBenchChunks(CLI::App& bench);
// `gpusched sim`: trace replay through core::Scheduler.
void RegisterSim(CLI::App& app);
// `gpusched demo`: the README's main job.
void RegisterDemo(CLI::App& app);

// Exit codes scripts can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the command ran and reports failure
inline constexpr int kExitUsage = 2;        // bad flags or input
inline constexpr int kExitUnavailable = 3;  // the server could not be reached

}  // namespace gpusched::cli
