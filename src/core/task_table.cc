#include "core/task_table.h"

#include <algorithm>
#include <string>

namespace gpusched::core {

Task& TaskTable::Insert(Task task) {
  const uint64_t id = task.id.value();
  Task& t = tasks_.emplace(id, std::move(task)).first->second;
  index_[id] = &t;
  return t;
}

StatusOr<Task*> TaskTable::InsertRestored(const Task& task) {
  if (!task.id.valid() || task.id.value() < next_id_) {
    return InvalidArgument("id: restored task " + task.id.ToString() +
                           " out of order (expected an id >= " + std::to_string(next_id_) + ")");
  }
  next_id_ = task.id.value() + 1;
  Task* t = &tasks_.emplace(task.id.value(), task).first->second;
  index_[task.id.value()] = t;
  return t;
}

void TaskTable::Erase(TaskId id) {
  held_.erase(id);
  tasks_.erase(id.value());
  index_.erase(id.value());
  gone_since_take_.push_back(id);  // TakeChanged does not report it
}

void TaskTable::SetActive(const Task& t, bool active) {
  if (active) {
    active_.insert(t.id);
    if (t.spec.time_limit_ms) time_limited_.insert(t.id);
  } else {
    active_.erase(t.id);
    time_limited_.erase(t.id);
  }
}

std::vector<TaskId> TaskTable::TakeChanged() {
  std::vector<TaskId> out;
  out.swap(changed_);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (!gone_since_take_.empty()) {  // forgotten or withdrawn since: not reported
    std::sort(gone_since_take_.begin(), gone_since_take_.end());
    std::erase_if(out, [&](TaskId id) {
      return std::binary_search(gone_since_take_.begin(), gone_since_take_.end(), id);
    });
    gone_since_take_.clear();
  }
  return out;
}

}  // namespace gpusched::core
