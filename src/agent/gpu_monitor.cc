#include "agent/gpu_monitor.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "agent/log_service.h"
#include "agent/task_files.h"

namespace gpusched::agent {

GpuMonitor::GpuMonitor(GpuDiscovery& gpus, const Clock& clock, Options options,
                       TaskPids task_pids, LogFn log)
    : gpus_(gpus),
      clock_(clock),
      options_(std::move(options)),
      task_pids_(std::move(task_pids)),
      log_(std::move(log)),
      health_(static_cast<int>(gpus.gpus().size()), options_.health_period_ms),
      watchdog_(options_.memory_grace_ms) {}

void GpuMonitor::AddTask(const TaskKey& task, TaskShare share) {
  std::lock_guard<std::mutex> lock(mu_);
  shares_[task] = std::move(share);
}

MiB GpuMonitor::RemoveTask(const TaskKey& task) {
  std::lock_guard<std::mutex> lock(mu_);
  shares_.erase(task);
  auto it = measured_peaks_.find(task);
  if (it == measured_peaks_.end()) return 0;
  const MiB peak = it->second;
  measured_peaks_.erase(it);
  return peak;
}

bool GpuMonitor::HasTask(const TaskKey& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return shares_.count(task) > 0;
}

std::vector<int> GpuMonitor::GpusOf(const TaskKey& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shares_.find(task);
  return it == shares_.end() ? std::vector<int>() : it->second.gpus;
}

void GpuMonitor::ApplyInjectedFaults(TimeMs now) {
  if (options_.fault_file.empty()) return;
  std::ifstream in(options_.fault_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto faults = core::ParseGpuFaults(text, static_cast<int>(gpus_.gpus().size()));
  if (!faults.ok()) {
    if (faults.status().message() != fault_file_error_) {
      fault_file_error_ = faults.status().message();
      log_(options_.fault_file + ": " + fault_file_error_, logging::Level::kInfo);
    }
    return;
  }
  if (faults->size() < faults_seen_) faults_seen_ = faults->size();  // rewritten shorter
  for (size_t i = faults_seen_; i < faults->size(); ++i) {
    log_("GPU " + std::to_string((*faults)[i].gpu) + ": " + (*faults)[i].error + " (injected)",
         logging::Level::kInfo);
    health_.Fault((*faults)[i], now);
  }
  faults_seen_ = faults->size();
}

std::vector<core::GpuHealthView> GpuMonitor::CheckHealth() {
  const TimeMs now = clock_.MonoMs();  // the health period is a duration
  ApplyInjectedFaults(now);
  for (const core::GpuFault& f : gpus_.PollFaults()) {
    log_("GPU " + std::to_string(f.gpu) + ": " + f.error, logging::Level::kInfo);
    health_.Fault(f, now);
  }
  const std::vector<bool> passed = gpus_.CheckHealth();
  for (size_t g = 0; g < passed.size(); ++g) health_.Checked(static_cast<int>(g), passed[g], now);
  return health_.Snapshot(now);
}

std::vector<WatchdogStop> GpuMonitor::WatchMemory() {
  std::map<TaskKey, TaskShare> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks = shares_;
  }
  if (tasks.empty()) return {};
  const std::vector<GpuProcessMemory> procs = gpus_.ProcessMemory();
  // A task that drops its id escapes nothing, one that copies another's kills nothing.
  const std::map<pid_t, TaskKey> owner = task_pids_();
  std::map<TaskKey, std::map<int, MiB>> used;
  for (const GpuProcessMemory& p : procs) {
    auto it = owner.find(p.pid);
    if (it != owner.end() && tasks.count(it->second)) used[it->second][p.gpu] += p.used_mib;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, per_gpu] : used) {
      if (!shares_.count(key)) continue;  // exited meanwhile: its report is sent
      for (const auto& [gpu, mib] : per_gpu) {
        measured_peaks_[key] = std::max(measured_peaks_[key], mib);
      }
    }
  }
  return watchdog_.Observe(tasks, used, clock_.MonoMs());  // the grace is a duration
}

std::map<TaskKey, GpuMonitor::Use> GpuMonitor::SimulatedUse(std::map<TaskKey, Use> tasks) const {
  for (auto& [key, use] : tasks) {
    std::istringstream in(ReadTaskFile(options_.log_dir_fd,
                                       LogFileName(key.first, key.second) + ".gpuutil", 64)
                              .value_or(""));
    if (!(in >> use.util)) use.util = 0;
    if (!(in >> use.mem_mib)) use.mem_mib = 0;
    use.util = std::clamp(use.util, 0, 100);
    use.mem_mib = std::max<MiB>(use.mem_mib, 0);
  }
  return tasks;
}

std::map<TaskKey, GpuMonitor::Use> GpuMonitor::MeasureUse() {
  std::map<TaskKey, Use> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : shares_) out[entry.first] = {};
  }
  if (out.empty() || !options_.task_processes) return {};
  if (gpus_.simulated()) return SimulatedUse(std::move(out));
  const auto utils = gpus_.ProcessUtilization();
  if (!utils) return {};
  const std::map<pid_t, TaskKey> owner = task_pids_();
  auto task_of = [&](int pid) -> std::optional<TaskKey> {
    auto it = owner.find(pid);
    return it == owner.end() ? std::nullopt : std::optional<TaskKey>(it->second);
  };
  for (const GpuProcessUtil& p : *utils) {
    if (auto key = task_of(p.pid); key && out.count(*key)) {
      out[*key].util = std::max(out[*key].util, p.sm_util);
    }
  }
  for (const GpuProcessMemory& p : gpus_.ProcessMemory()) {
    if (auto key = task_of(p.pid); key && out.count(*key)) out[*key].mem_mib += p.used_mib;
  }
  return out;
}

}  // namespace gpusched::agent
