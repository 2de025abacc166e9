#pragma once
// MemoryStore: a StateStore in process memory, for tests and benchmarks that do not measure
// persistence. Nothing survives the process. Thread-safe.

#include <map>
#include <mutex>

#include "store/state_store.h"

namespace gpusched::store {

class MemoryStore final : public StateStore {
 public:
  Status PutTasks(const std::vector<TaskRecord>& records) override;
  StatusOr<std::vector<TaskRecord>> LoadTasks() override;
  Status PutNode(const NodeRecord& node) override;
  StatusOr<std::vector<NodeRecord>> LoadNodes() override;
  Status AddMemoryObservation(const MemoryObservation& observation) override;
  StatusOr<std::vector<MemoryObservation>> LoadMemoryObservations() override;

 private:
  std::mutex mu_;
  std::map<uint64_t, TaskRecord> tasks_;
  std::map<std::string, NodeRecord> nodes_;
  std::vector<MemoryObservation> observations_;
};

}  // namespace gpusched::store
