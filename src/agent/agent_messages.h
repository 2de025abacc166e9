#pragma once
// What the agent tells the server, composed from what it knows (issue 40: out of
// Agent::Impl): its registration (RegisterNode), the node heartbeat (CN109992422A claims 5-6)
// and the batched task heartbeats (claim 7). Pure functions of their inputs: the agent
// gathers the facts under its locks, these only build the messages.
//
// Thread-safety: stateless.

#include <map>
#include <string>
#include <vector>

#include "agent/executor_status.h"
#include "agent/gpu_monitor.h"
#include "agent/task_executor.h"
#include "core/gpu_health.h"
#include "core/node.h"
#include "core/resources.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

// The node, as its registration describes it: the spec (name, address, capacity, GPUs by
// index, labels, taints, topology), this agent process's id, and whether its GPUs are
// simulated.
struct NodeFacts {
  core::NodeSpec spec;
  std::string instance;
  bool simulated = false;
};

// The host's CPUs (milli-CPUs, at least one CPU) and physical memory, as the kernel says.
core::Resources HostCapacity();

// A registration: `facts`, the tasks that run here (or wait to: two-way reconciliation,
// DESIGN.md "State") and the cluster this node's files belong to. The exits the server has
// not acknowledged are the caller's to add (UnackedExits::AddTo).
::gpusched::v1::AgentMessage RegistrationMessage(const NodeFacts& facts,
                                                 const std::vector<TaskKey>& running,
                                                 const std::string& cluster_id);

// A node heartbeat: each GPU's free memory (-1 unknown) and health, in index order, and the
// tasks that run here.
::gpusched::v1::AgentMessage NodeHeartbeatMessage(const std::vector<MiB>& gpu_free_mib,
                                                  const std::vector<core::GpuHealthView>& health,
                                                  const std::vector<TaskKey>& running);

// The task heartbeats of `running`, each with its GPU use when measured (`use`) and, when
// `with_executor_status` (a process executor: there are processes to look at), its status:
// running unless `seen` says it is hung, with the detail then.
::gpusched::v1::AgentMessage TaskHeartbeatsMessage(
    const std::vector<TaskKey>& running, const std::map<TaskKey, GpuMonitor::Use>& use,
    const std::map<TaskKey, TaskObservation>& seen, bool with_executor_status);

}  // namespace gpusched::agent
