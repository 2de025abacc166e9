#include "agent/launch_spec.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "agent/executor_status.h"
#include "agent/log_service.h"
#include "agent/rank_launcher.h"
#include "core/reserved_env.h"

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

// The task's environment: its own variables as data, the reserved names dropped except those
// the server sets itself; the account's USER, LOGNAME and HOME, as login would set them (the
// agent's would name root); --tasks-per-node for the shim's argv.
void SetEnvironment(const v1::Assign& a, LaunchSpec& spec) {
  for (const auto& [k, v] : a.env()) {
    if (!core::IsReservedEnvName(k)) {
      spec.env[k] = v;
    } else if (k == kTasksPerNodeEnv) {
      spec.tasks_per_node = std::clamp(std::atoi(v.c_str()), 1, kMaxTasksPerNode);
    } else if (core::IsServerSetEnvName(k)) {
      spec.agent_env[k] = v;
    }
  }
  if (spec.user) {
    spec.agent_env["USER"] = spec.user->name;
    spec.agent_env["LOGNAME"] = spec.user->name;
    spec.agent_env["HOME"] = spec.user->home;
  }
}

// Exactly the task's GPUs, numbered as NVML numbers them, its share of each, who it is.
void SetGpusAndIds(const v1::Assign& a, const NodeLaunchFacts& node, LaunchSpec& spec) {
  std::string visible, mem;
  for (int i = 0; i < a.gpus_size(); ++i) {
    visible += (i ? "," : "") + std::to_string(a.gpus(i));
    if (i < a.gpu_mem_mib_size()) mem += (i ? "," : "") + std::to_string(a.gpu_mem_mib(i));
  }
  spec.agent_env["CUDA_VISIBLE_DEVICES"] = visible;
  spec.agent_env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  spec.agent_env["GPUSCHED_GPU_MEM_MIB"] = mem;
  spec.agent_env["GPUSCHED_TASK_ID"] = std::to_string(a.id());
  spec.agent_env["GPUSCHED_ATTEMPT"] = std::to_string(a.attempt());
  // Issue 37 (Slurm's SLURM_RESTART_COUNT): the runs of the task before this one (after a
  // preemption, a checkpointed task resumes from its checkpoint when this is > 0).
  spec.agent_env["GPUSCHED_RESTART_COUNT"] = std::to_string(std::max<int64_t>(0, a.attempt() - 1));
  spec.agent_env["GPUSCHED_NODE"] = node.node_name;
}

// The share library goes first in LD_PRELOAD, before the task's own preloads (or the
// agent's, which the task would inherit); its ledger is one file per attempt, shared by the
// task's processes. gpusched-shim sets LD_PRELOAD from its --ld-preload just before it
// execs the task, so the library never loads into the shim.
void InjectPreload(const NodeLaunchFacts& node, LaunchSpec& spec) {
  auto own = spec.env.find("LD_PRELOAD");
  const std::string rest = own != spec.env.end() ? own->second : node.agent_ld_preload;
  spec.ld_preload = node.preload + (rest.empty() ? "" : " " + rest);
  spec.env.erase("LD_PRELOAD");
  spec.task_files["GPUSCHED_PRELOAD_STATE"] = ".gpumem";
  // The share the task cannot change (issue 35): a read-only file on a fixed descriptor; the
  // variable stays for programs that lose the descriptor (README of src/preload).
  spec.gpu_share_mib = spec.agent_env["GPUSCHED_GPU_MEM_MIB"];
}

// A task runs on the CPUs of its GPUs' NUMA node(s) (gpusched-shim applies its --cpus before
// it execs the task). Nothing is pinned when the topology or the node's CPU list is unknown.
std::string NumaCpus(const v1::Assign& a, const NodeLaunchFacts& node) {
  std::set<int> nodes;
  for (int g : a.gpus()) {
    const size_t gi = static_cast<size_t>(g);
    if (g < 0 || gi >= node.topology.numa.size() || node.topology.numa[gi] < 0) return "";
    nodes.insert(node.topology.numa[gi]);
  }
  std::string cpus;
  for (int n : nodes) {
    auto it = node.numa_cpus.find(n);
    if (it == node.numa_cpus.end()) return "";
    cpus += (cpus.empty() ? "" : ",") + it->second;
  }
  return cpus;
}

}  // namespace

LaunchSpec BuildLaunchSpec(const v1::Assign& a, std::optional<TaskUser> user,
                           const NodeLaunchFacts& node) {
  LaunchSpec spec;
  spec.id = a.id();
  spec.attempt = a.attempt();
  spec.user = std::move(user);
  spec.command.assign(a.command().begin(), a.command().end());
  spec.log_path = LogPath(node.log_dir, a.id(), a.attempt());
  if (a.has_duration_ms()) spec.duration_ms = a.duration_ms();
  SetEnvironment(a, spec);
  spec.workdir = a.workdir();
  spec.limits.mem_mib = a.cgroup_mem_mib();
  spec.limits.cpu_milli = a.cgroup_cpu_milli();
  spec.limits.gpus.assign(a.gpus().begin(), a.gpus().end());
  spec.limits.node_gpus = node.node_gpus;
  SetGpusAndIds(a, node, spec);
  spec.stop_signal = a.stop_signal();
  spec.log_max_bytes = node.log_max_bytes;
  // The files the task writes: created by the executor next to the log (task_files.h).
  if (node.simulated_gpus) {
    spec.task_files["GPUSCHED_PEAK_MIB_FILE"] = ".peak";
    spec.task_files["GPUSCHED_SIM_GPU_UTIL_FILE"] = ".gpuutil";
  }
  if (!node.preload.empty() && a.gpus_size() > 0) InjectPreload(node, spec);
  if (a.has_heartbeat_timeout_ms()) {  // CN109992422A claim 7 (executor_status.h)
    spec.task_files[kHeartbeatFileEnv] = ".heartbeat";
    spec.agent_env[kHeartbeatTimeoutEnv] = std::to_string(a.heartbeat_timeout_ms());
  }
  spec.cpus = NumaCpus(a, node);
  return spec;
}

}  // namespace gpusched::agent
