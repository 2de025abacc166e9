#include "agent/unacked_exits.h"

#include <algorithm>

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

int64_t EndedAgoMs(const v1::TaskStatus& st, TimeMs now) {
  return st.finished_ms() > 0 ? std::max<int64_t>(0, now - st.finished_ms()) : 0;
}

void UnackedExits::Keep(const v1::TaskStatus& st) { exits_[{st.id(), st.attempt()}] = st; }

bool UnackedExits::Acknowledge(const TaskKey& task) { return exits_.erase(task) > 0; }

std::optional<v1::TaskStatus> UnackedExits::Find(const TaskKey& task) const {
  auto it = exits_.find(task);
  if (it == exits_.end()) return std::nullopt;
  return it->second;
}

std::vector<TaskKey> UnackedExits::Tasks() const {
  std::vector<TaskKey> out;
  out.reserve(exits_.size());
  for (const auto& [key, st] : exits_) out.push_back(key);
  return out;
}

std::vector<TaskKey> UnackedExits::TakeAll() {
  std::vector<TaskKey> out = Tasks();
  exits_.clear();
  return out;
}

void UnackedExits::AddTo(v1::RegisterNode* r, TimeMs now) const {
  for (const auto& [key, st] : exits_) {
    v1::TaskStatus* f = r->add_finished();
    *f = st;
    f->set_ended_ago_ms(EndedAgoMs(st, now));
  }
}

}  // namespace gpusched::agent
