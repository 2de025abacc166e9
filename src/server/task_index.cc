#include "server/task_index.h"

namespace gpusched::server {

void TaskIndex::Put(uint64_t id, core::TaskState state, TimeMs now) {
  auto [it, fresh] = state_of_.try_emplace(id, state);
  if (!fresh) {
    if (it->second == state) return;
    by_state_[it->second].erase(id);
    it->second = state;
  }
  by_state_[state].insert(id);
  if (core::IsTerminal(state)) finished_order_.emplace_back(now, id);
}

void TaskIndex::Remove(uint64_t id, bool left_finished) {
  auto it = state_of_.find(id);
  if (it == state_of_.end()) return;
  if (left_finished) ++left_finished_[core::TaskStateName(it->second)];
  by_state_[it->second].erase(id);
  state_of_.erase(it);
}

const std::set<uint64_t>& TaskIndex::InState(core::TaskState state) const {
  static const std::set<uint64_t> kNone;
  auto it = by_state_.find(state);
  return it == by_state_.end() ? kNone : it->second;
}

void TaskIndex::AddLeftFinished(const std::string& state_name, int64_t count) {
  left_finished_[state_name] += count;
}

std::map<std::string, int64_t> TaskIndex::CountsByState() const {
  std::map<std::string, int64_t> out = left_finished_;
  for (const auto& [state, ids] : by_state_) out[core::TaskStateName(state)] += ids.size();
  return out;
}

void TaskIndex::ApplyRetention(TimeMs now, int64_t keep, DurationMs keep_ms,
                               const std::function<Retire(uint64_t id)>& retire) {
  while (!finished_order_.empty()) {
    const auto [finished_ms, id] = finished_order_.front();
    auto state = state_of_.find(id);
    if (state == state_of_.end() || !core::IsTerminal(state->second)) {
      finished_order_.pop_front();
      continue;
    }
    const bool over =
        static_cast<int64_t>(finished_order_.size()) > keep || now - finished_ms > keep_ms;
    if (!over) return;
    switch (retire(id)) {
      case Retire::kWait:
        return;
      case Retire::kGone:
      case Retire::kRetired:
        finished_order_.pop_front();
        break;
    }
  }
}

}  // namespace gpusched::server
