#include "core/task_queues.h"

namespace gpusched::core {

void FailureQueue::Push(TaskId id) {
  if (position_.count(id)) return;
  position_[id] = next_;
  order_.insert({next_++, id});
}

bool FailureQueue::Erase(TaskId id) {
  auto it = position_.find(id);
  if (it == position_.end()) return false;
  order_.erase({it->second, id});
  position_.erase(it);
  return true;
}

std::vector<TaskId> FailureQueue::Snapshot() const {
  std::vector<TaskId> out;
  out.reserve(order_.size());
  for (const auto& e : order_) out.push_back(e.second);
  return out;
}

std::vector<TaskId> FailureQueue::Drain() {
  std::vector<TaskId> out = Snapshot();
  order_.clear();
  position_.clear();
  return out;
}

void ParkedQueue::Park(const RequestShape& shape, const QueueKey& key, int64_t round,
                       const PlacementReport& report, const std::string& summary) {
  auto [it, fresh] = groups_.try_emplace(shape);
  if (fresh) {
    it->second.report = report;
    it->second.summary = summary;
    it->second.report_round = round;
  }
  it->second.keys.insert(key);
  entries_[key.id] = Entry{shape, key, round};
}

bool ParkedQueue::Erase(TaskId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  auto g = groups_.find(it->second.shape);
  g->second.keys.erase(it->second.key);
  if (g->second.keys.empty()) groups_.erase(g);
  entries_.erase(it);
  return true;
}

ParkedQueue::Entry* ParkedQueue::Find(TaskId id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

const ParkedQueue::Entry* ParkedQueue::Find(TaskId id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

void ParkedQueue::Clear() {
  groups_.clear();
  entries_.clear();
}

}  // namespace gpusched::core
