#pragma once
// BuildLaunchSpec: what an assignment becomes for the executor (issue 40: split out of
// Agent::Impl). It reads the assignment and the node's facts it is given, nothing else: no
// environment variable, file or clock, so a test states both and checks the spec.
//
// The trust boundary (issue 35) is here: the task's own variables are data. Reserved names
// (core::IsReservedEnvName, GPUSCHED_*) are dropped from them, except the few the server sets
// itself (IsServerSetEnvName; it refuses them at submission); everything the agent decides
// (GPUs, shares, ids, the account's USER/LOGNAME/HOME, the preload library, the files the task
// writes, its CPUs) is set in agent_env and the other fields, after the task's.
//
// Thread-safety: a pure function.

#include <map>
#include <optional>
#include <string>

#include "agent/task_executor.h"
#include "core/topology.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

// What the agent knows of its node, set once at start.
struct NodeLaunchFacts {
  std::string node_name;
  std::string log_dir;  // the task's log is log_dir/LogFileName(id, attempt)
  int node_gpus = 0;
  bool simulated_gpus = false;  // the task writes its peak and use to files instead of NVML
  std::string preload;          // the GPU-memory share library to inject; "" = none
  std::string agent_ld_preload;  // the agent's own LD_PRELOAD, which tasks would inherit
  core::GpuTopology topology;    // empty = unknown: nothing is pinned
  std::map<int, std::string> numa_cpus;  // NUMA node -> "0-7,16-23"
  int64_t log_max_bytes = 0;
};

// `user`: the account the task runs as (RunAs), none = the agent's own.
LaunchSpec BuildLaunchSpec(const ::gpusched::v1::Assign& a, std::optional<TaskUser> user,
                           const NodeLaunchFacts& node);

}  // namespace gpusched::agent
