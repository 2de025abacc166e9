#pragma once
// `gpusched bench scale` (issue 43): the parts its two runs share. bench_scale_command.cc
// measures many agents under load; bench_scale_pending.cc (--pending N) a server holding N
// pending tasks. Both drive a real `gpusched server` child process and a SimAgentFleet.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/child_process.h"
#include "cli/sim_agent_fleet.h"

namespace gpusched::cli::scale {

// The flags of `bench scale`, with their defaults.
struct ScaleFlags {
  bool json = false;
  std::vector<int> agents{1000};
  int tasks = 2000;
  int task_ms = 1000;
  int clients = 8;
  int idle_seconds = 10;
  int threads = 2;
  uint64_t seed = 42;
  int64_t pending = 0;  // > 0: the million-task run (bench_scale_pending.cc)
  std::string capacity_wait = "failure_queue";  // the server's default
};

// The server under test: `gpusched server` on loopback with its SQLite store in `dir`.
struct ScaleServer {
  ChildProcess proc;
  std::string address;
  int http_port = 0;
};

// Starts `s` on loopback with its store in DIR/data and `capacity_wait`; returns once it
// answers (Fail otherwise).
void StartScaleServer(const std::string& dir, const ScaleFlags& f, ScaleServer& s);
// User + system CPU seconds of process `pid` (/proc/PID/stat), or -1.
double ProcessCpuSeconds(pid_t pid);
// The cumulative bucket counts of histogram `name` in Prometheus text: (upper bound, count).
std::vector<std::pair<double, double>> HistogramBuckets(const std::string& text,
                                                        const std::string& name);
// Quantile q of the observations between two readings of the same histogram, interpolated
// linearly inside its bucket (Prometheus' histogram_quantile); in ms. 0 without observations.
double HistogramQuantileMs(const std::vector<std::pair<double, double>>& before,
                           const std::vector<std::pair<double, double>>& after, double q);
// A fleet of `agents` against `address`, returned once the server lists them all connected
// and reachable; `*ready_seconds`: how long that took.
std::unique_ptr<SimAgentFleet> StartFleet(const ScaleFlags& f, const std::string& address,
                                          int agents, double* ready_seconds);
// One run's figures as indented text lines.
void PrintScaleText(const nlohmann::ordered_json& j);
// --pending: the million-task run at `agents` agents; its figures.
nlohmann::ordered_json RunPendingScale(const ScaleFlags& f, int agents);

}  // namespace gpusched::cli::scale
