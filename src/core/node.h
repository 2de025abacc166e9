#pragma once
// The node model: what an agent registers (NodeSpec) and the scheduler's view of it
// (NodeState), including the per-GPU accounting of CN109992422A's cluster state table.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/units.h"
#include "core/resources.h"
#include "core/topology.h"

namespace gpusched::core {

enum class TaintEffect { kNoSchedule, kPreferNoSchedule, kNoExecute };

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
  bool operator==(const Taint&) const = default;
};

// Kubernetes semantics: operator "Exists" ignores the value; an empty key with Exists
// tolerates every taint; an empty effect (has_effect = false) matches every effect.
struct Toleration {
  std::string key;
  std::string value;
  bool exists = false;
  bool has_effect = false;
  TaintEffect effect = TaintEffect::kNoSchedule;
  bool operator==(const Toleration&) const = default;
};

struct GpuSpec {
  std::string model;  // e.g. "A100-80GB"
  MiB total_mib = 0;
};

struct NodeSpec {
  std::string name;
  std::string address;  // where the probe daemon checks it
  Resources capacity;
  std::vector<GpuSpec> gpus;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  GpuTopology topology;  // empty = unknown (placement ignores topology)
};

struct GpuState {
  int index = 0;
  int model_id = 0;     // interned model name (ClusterState::ModelName)
  MiB total_mib = 0;
  MiB allocated_mib = 0;  // sum of reservations
  MiB reported_free_mib = -1;  // from the last heartbeat; -1 = never reported
  int tasks = 0;          // tasks holding a share of this GPU
  // Health as the agent reports it (Xid, ECC, lost GPU, an injected fault). An unhealthy
  // GPU takes no new task (filter GpuHealth); the agent says when it has passed its checks
  // for the health period again.
  bool healthy = true;
  std::string last_error;  // the latest fault, kept after the GPU returns; "" = none

  MiB accounted_free() const { return total_mib - allocated_mib; }
};

struct NodeState {
  std::string name;
  std::string address;
  Resources capacity;
  Resources allocated;
  std::vector<GpuState> gpus;
  GpuTopology topology;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;

  bool reachable = true;   // probe daemon (CN115981827A claim 9)
  bool available = true;   // heartbeats (CN109992422A claims 5, 6)
  // Issue 37: silent past node_lost_after and its tasks re-queued; cleared by its next
  // heartbeat or registration. A node silent for less (!available && !lost) is unreachable.
  bool lost = false;
  bool cordoned = false;
  bool draining = false;
  TimeMs last_heartbeat_ms = 0;
  int running_tasks = 0;   // tasks assigned or running here

  MiB gpu_total_mib = 0;       // sum over GPUs
  MiB gpu_allocated_mib = 0;   // sum over GPUs
  MiB max_gpu_total_mib = 0;   // largest single GPU
  // Derived by ClusterState for the hot path: position of `name` in name order (ties are
  // broken by name without comparing strings), and 1 / capacity (0 where capacity is 0).
  uint32_t name_rank = 0;
  double inv_cpu = 0, inv_mem = 0, inv_gpu_mem = 0;
};

// A compact copy of what the filters and scorers read, kept by ClusterState in one contiguous
// array so a placement scans ~100 bytes per node instead of chasing NodeState's heap parts.
// Always equal to what NodeState implies (ClusterState refreshes it on every change).
struct NodeSummary {
  bool schedulable = false;  // reachable && available && !cordoned && !draining
  bool reachable = false, available = false, unschedulable = false;
  bool has_taints = false;
  bool has_labels = false;
  int32_t model_id = -1;      // the one GPU model of the node, -1 = none or mixed
  int32_t gpu_count = 0;
  int32_t unhealthy_gpus = 0;   // > 0: the filters read the full node
  int32_t whole_free_gpus = 0;  // GPUs with no reservation at all
  int32_t running_tasks = 0;
  uint32_t name_rank = 0;
  MiB max_gpu_free_mib = 0;     // accounted free memory of the emptiest GPU
  int64_t cpu_free = 0, mem_free = 0;
  int64_t cpu_alloc = 0, mem_alloc = 0;
  MiB gpu_alloc_mib = 0, max_gpu_total_mib = 0, gpu_total_mib = 0;
  double inv_cpu = 0, inv_mem = 0, inv_gpu_mem = 0;
};

}  // namespace gpusched::core
