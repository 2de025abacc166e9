#include "agent/work_queue.h"

#include <utility>

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

bool AgentWorkQueue::Push(v1::ServerMessage m) {
  if (m.has_assign()) {
    if (assigns_ >= max_assigns_) return false;
    ++assigns_;
  }
  messages_.push_back(std::move(m));
  cv_.notify_one();
  return true;
}

std::optional<v1::ServerMessage> AgentWorkQueue::Pop(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return closed_ || !messages_.empty(); });
  if (closed_) return std::nullopt;
  v1::ServerMessage m = std::move(messages_.front());
  messages_.pop_front();
  if (m.has_assign()) {
    --assigns_;
    launching_ = TaskKey{m.assign().id(), m.assign().attempt()};
  }
  return m;
}

void AgentWorkQueue::Close() {
  closed_ = true;
  cv_.notify_all();
}

void AgentWorkQueue::Clear() {
  messages_.clear();
  assigns_ = 0;
}

std::vector<TaskKey> AgentWorkQueue::QueuedAssigns() const {
  std::vector<TaskKey> out;
  for (const v1::ServerMessage& m : messages_) {
    if (m.has_assign()) out.emplace_back(m.assign().id(), m.assign().attempt());
  }
  return out;
}

}  // namespace gpusched::agent
