#pragma once
// ResourceManager: CN109992422A's resource-management module (claims 9-10). It owns the state
// table of servers and GPUs (ClusterState, fed by registrations and heartbeats), records which
// task holds what (t -> (s, g, req)), and answers a ResourceRequest from task management with
// a placement or the reason there is none (Placer). Task management (Scheduler: admission,
// the memory table, the task table, Q and FQ) never reads the state table to decide where a
// task goes; it sends a request and applies the answer.
//
// Thread-safety: none; the Scheduler that owns it serialises every call.

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "core/cluster_state.h"
#include "core/placement.h"

namespace gpusched::core {

// CN109992422A claim 10: what task management sends resource management for one task. The
// shape carries the GPU memory per GPU that task management computed (memory table, explicit
// value, or whole GPUs), the GPU count and model, CPU and RAM, and the node rules.
struct ResourceRequest {
  TaskId task;
  PlacementRequest shape;  // of one node (a gang's rank)
  int64_t nodes = 1;       // a gang: this many distinct nodes, each with `shape`
};

class ResourceManager {
 public:
  ResourceManager(PlacementOptions options, Executor* executor)
      : placer_(std::move(options), executor) {
    state_.KeepIndex(placer_.MayUseIndex());  // a placer that always scans never reads it
  }

  // ---- the state table ----
  const ClusterState& state() const { return state_; }
  // Registers a node or updates a known one's capacity (ClusterState::Upsert).
  StatusOr<size_t> RegisterNode(const NodeSpec& spec, TimeMs now_ms);
  // Issue 39 (`node rm`): forgets the node at `index` (ClusterState::Remove: later indices
  // move down by one). REQUIRES: no task holds anything there.
  void RemoveNode(size_t index);
  // Heartbeat data and flags (ClusterState::Update).
  template <typename Fn>
  void Update(size_t index, Fn&& fn) {
    state_.Update(index, std::forward<Fn>(fn));
  }
  // The largest node and GPU for a model (-1 = any), cached until a node registers (the scan
  // is O(nodes) and admission asks for every task).
  const ClusterState::Extremes& Extremes(int model_id) const;

  // ---- the workload seen so far (fragmentation.h) ----
  // Counts a submitted task's shape, when a min_fragmentation order will read it.
  void Observe(const PlacementRequest& shape);
  const WorkloadDistribution& workload() const { return workload_; }

  // ---- answers ----
  // Where the request would go on the state table as it is now. Changes nothing.
  PlacementResult Answer(const ResourceRequest& request) const {
    return placer_.Place(state_, request.shape, &workload_);
  }
  // The same answer over another view of the table (a pass's plan, a reclaim trial).
  PlacementResult AnswerOn(const ClusterState& view, const ResourceRequest& request) const {
    return placer_.Place(view, request.shape, &workload_);
  }
  const Placer& placer() const { return placer_; }

  // ---- grants ----
  // Reserves `p` for `task`: visible to the very next answer (CN109992422A test 6).
  // REQUIRES: p fits (it came from an answer on the current table, or from Rebind).
  void Grant(TaskId task, const Placement& p);
  // Issue 43: grants and returns until the hold ends move their nodes in the node index
  // once, when it ends (ClusterState::IndexHold). No answer may be asked for meanwhile.
  ClusterState::IndexHold HoldIndex() { return ClusterState::IndexHold(state_); }
  // Gives `task`'s reservation back. REQUIRES: Grant(task, p) was called and not undone.
  void Return(TaskId task, const Placement& p);
  // Assigned or running tasks on the node at `index`, ascending id, each once.
  const std::vector<TaskId>& TasksOn(size_t index) const { return tasks_on_node_[index]; }
  // A placement stored before a restart, rebound to this table's node indices; nullopt when
  // its node is unknown or it no longer fits.
  std::optional<Placement> Rebind(const Placement& p) const;

 private:
  ClusterState state_;
  Placer placer_;
  WorkloadDistribution workload_;
  // By node index: sorted, a set without a node per task (a pass grants thousands).
  std::vector<std::vector<TaskId>> tasks_on_node_;
  mutable std::unordered_map<int, ClusterState::Extremes> extremes_cache_;
};

}  // namespace gpusched::core
