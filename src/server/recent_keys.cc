#include "server/recent_keys.h"

#include <algorithm>

namespace gpusched::server {

RecentKeys::RecentKeys(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

void RecentKeys::Remember(const std::string& key, TaskId first) {
  const uint64_t generation = next_generation_++;
  keys_[key] = Entry{first, generation};
  order_.emplace_back(key, generation);
  held_[first] = key;
  Evict();
}

void RecentKeys::Evict() {
  while (!order_.empty()) {
    const auto& [key, generation] = order_.front();
    auto it = keys_.find(key);
    const bool live = it != keys_.end() && it->second.generation == generation;
    if (live && keys_.size() <= capacity_) return;
    if (live) keys_.erase(it);
    order_.pop_front();
  }
}

std::optional<TaskId> RecentKeys::Find(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return it->second.first;
}

void RecentKeys::Committed(TaskId first) { held_.erase(first); }

std::optional<std::string> RecentKeys::Withdraw(TaskId first) {
  auto h = held_.find(first);
  if (h == held_.end()) return std::nullopt;
  std::string key = std::move(h->second);
  held_.erase(h);
  if (auto it = keys_.find(key); it != keys_.end() && it->second.first == first) keys_.erase(it);
  return key;
}

}  // namespace gpusched::server
