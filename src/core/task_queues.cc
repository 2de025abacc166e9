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

}  // namespace gpusched::core
