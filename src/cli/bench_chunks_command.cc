// `gpusched bench chunks [--json]`: the CN110955526B chunk scheduler on simulated GPUs that
// really compute. Reports
// - throughput: a scale stage over `--mib` MiB of uint32 in default 64 MiB chunks (GB/s of
//   input processed, wall time on the real clock, after a warm-up run);
// - overhead per chunk: wall time per chunk of the same stage in 4 KiB chunks, where copying
//   and computing are negligible (placement, stream and memory bookkeeping, device queueing);
// - the value of locality: an iterative job (a persisted buffer summed `--iterations` times)
//   under the patent policy vs locality-blind round-robin: bytes copied host to device and wall.

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "dispatch/chunks/stage_runner.h"
#include "dispatch/sim_device.h"

namespace gpusched::cli {
namespace {

using chunks::ChunkConfig;
using chunks::JobSpec;
using chunks::kMiB;

struct BenchOptions {
  int gpus = 4;
  int64_t mib = 512;
  int iterations = 5;
  bool json = false;
};

struct JobRun {
  double wall_s = 0;
  int64_t bytes_h2d = 0;
  int64_t subtasks = 0;
};

// Runs `job` twice on fresh simulated GPUs and returns the second run's wall time and
// counters. The first run is a warm-up, as for any GPU benchmark: it faults in the device
// memory (which SimDevice keeps for reuse) and the output pages, and first-touch page faults
// cost more than the copies and kernels being measured (several s per GiB on some VMs).
StatusOr<JobRun> RunJob(const BenchOptions& o, const ChunkConfig& config, chunks::StreamPolicy policy,
                     const JobSpec& job) {
  RealClock clock;
  std::vector<std::unique_ptr<dispatch::SimDevice>> devices;
  std::vector<dispatch::Device*> raw;
  for (int i = 0; i < o.gpus; ++i) {
    devices.push_back(std::make_unique<dispatch::SimDevice>(
        dispatch::SimDeviceOptions{i, "", 4 * 1024, config.streams_per_gpu}, clock));
    raw.push_back(devices.back().get());
  }
  auto kernels = chunks::KernelRegistry::WithBuiltins();
  ThreadPool pool(static_cast<size_t>(o.gpus * config.streams_per_gpu));
  JobRun measured;
  for (int pass = 0; pass < 2; ++pass) {
    // A fresh scheduler per pass: the measured run starts from the same state (round-robin
    // counter, empty cache map) as a single cold run would.
    chunks::ChunkScheduler scheduler(raw, config, clock, policy);
    chunks::StageRunner runner(scheduler, *kernels, pool);
    const int64_t start = clock.NowNs();
    GS_ASSIGN_OR_RETURN(chunks::JobResult result, runner.Run(job));
    measured = JobRun{static_cast<double>(clock.NowNs() - start) / 1e9, result.stats.bytes_h2d,
                   result.stats.subtasks};
  }
  return measured;
}

int RunBench(const BenchOptions& o) {
  const int64_t bytes = o.mib * kMiB;
  std::unique_ptr<uint32_t[]> data(new uint32_t[static_cast<size_t>(bytes / 4)]);
  for (int64_t i = 0; i < bytes / 4; ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);

  // The output goes to a destination of ours, reused by both runs, not to runner storage
  // allocated (and faulted in) afresh by each run.
  std::unique_ptr<uint32_t[]> out(new uint32_t[static_cast<size_t>(bytes / 4)]);
  JobSpec scale;
  scale.buffers = {{"in", {data.get(), bytes}}, {"out", {out.get(), bytes}}};
  scale.stages = {{"scale", "scale_u32", {3.0}, {"in"}, "out", {}}};
  auto through = RunJob(o, ChunkConfig{}, chunks::StreamPolicy::kPatent, scale);

  JobSpec small = scale;
  small.buffers = {{"in", {data.get(), 64 * kMiB}}, {"out", {out.get(), 64 * kMiB}}};
  ChunkConfig tiny;
  tiny.chunk_bytes = 4096;
  auto overhead = RunJob(o, tiny, chunks::StreamPolicy::kPatent, small);

  JobSpec iterative;
  iterative.buffers = {{"in", {data.get(), bytes}, /*cache=*/true}};
  for (int i = 0; i < o.iterations; ++i) {
    iterative.stages.push_back({"sum" + std::to_string(i), "sum_u32", {}, {"in"}, "total" + std::to_string(i), {}});
  }
  // 40 MiB chunks: 13 per 512 MiB pass, not a multiple of the GPU count, so round-robin's
  // counter drifts out of phase with the cache from pass to pass, as in most real jobs.
  ChunkConfig reuse;
  reuse.chunk_bytes = 40 * kMiB;
  auto patent = RunJob(o, reuse, chunks::StreamPolicy::kPatent, iterative);
  auto rr = RunJob(o, reuse, chunks::StreamPolicy::kRoundRobin, iterative);
  for (const auto* r : {&through, &overhead, &patent, &rr}) {
    if (!r->ok()) {
      std::fprintf(stderr, "bench chunks: %s\n", r->status().ToString().c_str());
      return kExitFailure;
    }
  }
  const double gb_per_s = static_cast<double>(bytes) / 1e9 / through->wall_s;
  const double ns_per_chunk = overhead->wall_s * 1e9 / static_cast<double>(overhead->subtasks);
  if (o.json) {
    std::printf("{\"gpus\": %d, \"input_mib\": %" PRId64 ", \"gb_per_s\": %.3f, \"overhead_ns_per_chunk\": %.0f, "
                "\"rows\": [{\"policy\": \"patent\", \"bytes_h2d\": %" PRId64 ", \"wall_s\": %.4f}, "
                "{\"policy\": \"round-robin\", \"bytes_h2d\": %" PRId64 ", \"wall_s\": %.4f}]}\n",
                o.gpus, o.mib, gb_per_s, ns_per_chunk, patent->bytes_h2d, patent->wall_s, rr->bytes_h2d, rr->wall_s);
    return kExitOk;
  }
  std::printf("chunk scheduler (CN110955526B) on %d simulated GPUs x 4 streams\n", o.gpus);
  std::printf("  throughput      %.3f GB/s  (scale over %" PRId64 " MiB, 64 MiB chunks, %.3f s)\n", gb_per_s, o.mib,
              through->wall_s);
  std::printf("  overhead        %.0f ns per chunk  (%" PRId64 " chunks of 4 KiB)\n", ns_per_chunk, overhead->subtasks);
  std::printf("  locality: %d sums over a persisted %" PRId64 " MiB buffer, 40 MiB chunks\n", o.iterations, o.mib);
  std::printf("    %-12s %14s %10s\n", "policy", "bytes_h2d", "wall_s");
  std::printf("    %-12s %14" PRId64 " %10.3f\n", "patent", patent->bytes_h2d, patent->wall_s);
  std::printf("    %-12s %14" PRId64 " %10.3f\n", "round-robin", rr->bytes_h2d, rr->wall_s);
  return kExitOk;
}

}  // namespace

void RegisterBenchChunks(CLI::App& bench) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand("chunks", "CN110955526B chunk scheduler: throughput, overhead, locality");
  cmd->add_option("--gpus", options->gpus, "simulated GPUs")->check(CLI::Range(1, 64));
  cmd->add_option("--mib", options->mib, "input size in MiB")->check(CLI::Range(1, 16384));
  cmd->add_option("--iterations", options->iterations, "sums in the locality job")->check(CLI::Range(1, 100));
  cmd->add_flag("--json", options->json, "print one JSON object");
  cmd->callback([options] {
    const int rc = RunBench(*options);
    if (rc != kExitOk) ExitWith(rc);
  });
}

}  // namespace gpusched::cli
