#pragma once
// GpuMonitor: what the agent watches of its GPUs and of the GPU tasks on them (issue 40: split
// out of Agent::Impl). For each node heartbeat, every GPU's health: faults injected through
// the fault file (tests), faults the driver reports, and the health checks, held out for the
// health period after the last one (core/gpu_health.h). For the GPU tasks running here, their
// shares, what their processes hold per GPU against them (the memory watchdog: it names the
// tasks to stop), the most each held on one device (the only peak the agent measures itself,
// issue 36), and their use of their GPUs for the task heartbeat (idle allocations).
//
// Processes belong to tasks by what the executor says (cgroup or process group), never by
// what their environment claims. Every duration (the watchdog's grace, the health period) is
// measured on the clock's monotonic time: a wall-clock step changes none of them.
//
// Thread-safety: AddTask, RemoveTask, HasTask and GpusOf from any thread (they take the
// monitor's own lock, which it never holds while calling out). CheckHealth, WatchMemory and
// MeasureUse from one thread (the agent's heartbeat thread).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/gpu_discovery.h"
#include "agent/gpu_memory_watchdog.h"
#include "agent/task_executor.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/gpu_health.h"

namespace gpusched::agent {

class GpuMonitor {
 public:
  struct Options {
    // Faults injected for tests, one a line (core/gpu_health.h: "1 xid 79"), read as lines
    // are added. "" = none.
    std::string fault_file;
    DurationMs memory_grace_ms = 30'000;   // over its share this long: stopped
    DurationMs health_period_ms = 300'000;  // checks to pass after a fault
    // False with the noop executor: no process, no use to measure.
    bool task_processes = true;
    // Simulated GPUs: the task's own use file (<log>.gpuutil, "UTIL [MEM_MIB]") under this
    // directory.
    int log_dir_fd = -1;
  };
  using TaskPids = std::function<std::map<pid_t, TaskKey>()>;
  using LogFn = std::function<void(const std::string&, logging::Level)>;

  GpuMonitor(GpuDiscovery& gpus, const Clock& clock, Options options, TaskPids task_pids,
             LogFn log);

  void AddTask(const TaskKey& task, TaskShare share);
  // Forgets the task; returns the most GPU memory its processes held on one device while it
  // was watched (0 = never seen).
  MiB RemoveTask(const TaskKey& task);
  bool HasTask(const TaskKey& task) const;
  std::vector<int> GpusOf(const TaskKey& task) const;  // empty when not watched

  // The faults since the last call applied, one health check of every GPU; their health.
  std::vector<core::GpuHealthView> CheckHealth();
  // What each task's processes hold per GPU against its share: the tasks to stop now.
  std::vector<WatchdogStop> WatchMemory();
  struct Use {
    int util = 0;  // percent
    MiB mem_mib = 0;
  };
  // Each GPU task's use of its GPUs: NVML's highest SM utilisation of its processes' samples
  // since the last call and the memory they hold, or (simulated GPUs) what the task wrote to
  // its use file (0 % while it wrote nothing). Empty when the driver cannot tell.
  std::map<TaskKey, Use> MeasureUse();

 private:
  void ApplyInjectedFaults(TimeMs now);
  std::map<TaskKey, Use> SimulatedUse(std::map<TaskKey, Use> tasks) const;

  GpuDiscovery& gpus_;
  const Clock& clock_;
  Options options_;
  TaskPids task_pids_;
  LogFn log_;
  core::GpuHealthTracker health_;  // heartbeat thread only, as the next three
  MemoryWatchdog watchdog_;
  size_t faults_seen_ = 0;       // faults of the fault file already applied
  std::string fault_file_error_;  // the last parse error said (each is said once)

  mutable std::mutex mu_;
  std::map<TaskKey, TaskShare> shares_;    // mu_
  std::map<TaskKey, MiB> measured_peaks_;  // mu_
};

}  // namespace gpusched::agent
