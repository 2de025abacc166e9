#pragma once
// StateStore: where the control plane keeps what must survive a restart (DESIGN.md "State"):
// every task record, the nodes (with cordon/drain flags) and the GPU-memory peaks agents
// observed (so the CN109992422A memory table keeps what it learned).
//
// Contract: a write has returned OK only once it is durable against a crash of the process
// (kill -9); the server acknowledges a submission only after PutTasks returned OK.
// Thread-safety: implementations are safe to call from several threads.

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/task.h"

namespace gpusched::store {

struct TaskRecord {
  core::Task task;
  // Where the task ran last; kept after core releases the placement (finished tasks).
  std::optional<core::Placement> last_placement;
};

struct NodeRecord {
  core::NodeSpec spec;
  bool cordoned = false;
  bool draining = false;
};

struct MemoryObservation {
  core::MemoryProfile profile;
  MiB peak_mib = 0;
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Inserts or replaces every record, all in one transaction.
  virtual Status PutTasks(const std::vector<TaskRecord>& records) = 0;
  // Every task, ascending id.
  virtual StatusOr<std::vector<TaskRecord>> LoadTasks() = 0;
  virtual Status PutNode(const NodeRecord& node) = 0;
  virtual StatusOr<std::vector<NodeRecord>> LoadNodes() = 0;  // ascending name
  virtual Status AddMemoryObservation(const MemoryObservation& observation) = 0;
  virtual StatusOr<std::vector<MemoryObservation>> LoadMemoryObservations() = 0;
};

}  // namespace gpusched::store
