#pragma once
// The release-pass benchmark behind `gpusched bench waiting` (issue 43): every GPU of a
// cluster busy, W tasks waiting in the failure queue for capacity (the server's default
// `capacity_wait: failure_queue`), then one running task ends at a time and the release pass
// it triggers is timed. Such a pass re-evaluates the tasks waiting for capacity (issue 37):
// what it costs per waiting task is what a million pending tasks cost each release.

#include <cstdint>
#include <ostream>
#include <vector>

namespace gpusched::bench {

struct WaitingBenchConfig {
  int64_t nodes = 1000;
  int64_t gpus_per_node = 8;
  int64_t waiting = 100'000;
  int64_t releases = 20;  // release passes timed
  uint64_t seed = 42;
};

struct WaitingBenchResult {
  WaitingBenchConfig config;
  int64_t waiting_in_fq = 0;    // tasks waiting for capacity in FQ when the releases began
  double submit_seconds = 0;    // submitting the W tasks
  double first_pass_seconds = 0;  // the pass that sent them to FQ
  // The timed release passes: each placed exactly one task (checked).
  double release_pass_p50_ms = 0;
  double release_pass_max_ms = 0;
  double ns_per_waiting_task = 0;  // release_pass_p50_ms / waiting_in_fq
  int64_t placed = 0;           // by the timed passes
  int64_t decisions = 0;        // attempts of the timed passes (memo hits included)
  int64_t memo_hits = 0;
  int64_t visited = 0;          // tasks the timed passes looked at one by one
};

WaitingBenchResult RunWaitingBench(const WaitingBenchConfig& config);
void PrintWaitingBenchRow(std::ostream& out, const WaitingBenchResult& r);
void PrintWaitingBenchJson(std::ostream& out, const std::vector<WaitingBenchResult>& results);

}  // namespace gpusched::bench
