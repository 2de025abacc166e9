#include "store/memory_store.h"

namespace gpusched::store {

Status MemoryStore::PutTasks(const std::vector<TaskRecord>& records) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const TaskRecord& r : records) tasks_[r.task.id.value()] = r;
  return Status::Ok();
}

StatusOr<std::vector<TaskRecord>> MemoryStore::LoadTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskRecord> out;
  for (const auto& [id, r] : tasks_) out.push_back(r);
  return out;
}

Status MemoryStore::PutNode(const NodeRecord& node) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[node.spec.name] = node;
  return Status::Ok();
}

StatusOr<std::vector<NodeRecord>> MemoryStore::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeRecord> out;
  for (const auto& [name, r] : nodes_) out.push_back(r);
  return out;
}

Status MemoryStore::AddMemoryObservation(const MemoryObservation& observation) {
  std::lock_guard<std::mutex> lock(mu_);
  observations_.push_back(observation);
  return Status::Ok();
}

StatusOr<std::vector<MemoryObservation>> MemoryStore::LoadMemoryObservations() {
  std::lock_guard<std::mutex> lock(mu_);
  return observations_;
}

}  // namespace gpusched::store
