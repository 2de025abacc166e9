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
                       const PlacementReport& report, const std::string& summary,
                       int64_t pass, TimeMs at_ms) {
  auto [it, fresh] = groups_.try_emplace(shape);
  if (fresh) SetReport(it->second, report, summary, pass, at_ms);
  it->second.keys.insert(key);
  // The task's own record is as new as the group's report (both from the latest pass).
  entries_[key.id] = Entry{shape, key, round, it->second.report_seq};
}

void ParkedQueue::SetReport(Group& g, PlacementReport report, std::string summary,
                            int64_t pass, TimeMs at_ms) {
  g.report = std::move(report);
  g.summary = std::move(summary);
  g.report_seq = ++report_seq_;
  g.report_pass = pass;
  g.report_ms = at_ms;
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
