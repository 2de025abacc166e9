#include "server/stream_limits.h"

namespace gpusched::server {

StatusOr<StreamLimiter::Slot> StreamLimiter::Acquire(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t& mine = by_user_[user];
  if (mine >= limits_.per_user) {
    if (mine == 0) by_user_.erase(user);
    return ResourceExhausted("streams: user " + user + " has " + std::to_string(mine) +
                             " streams open (watch, events, log follow), the most "
                             "stream_limit_per_user allows; close one or poll instead");
  }
  if (open_ >= limits_.total) {
    if (mine == 0) by_user_.erase(user);
    return ResourceExhausted("streams: " + std::to_string(open_) +
                             " streams are open on this server, the most stream_limit "
                             "allows; close one or poll instead");
  }
  ++mine;
  ++open_;
  return Slot(static_cast<void*>(this), [this, user](void*) { Release(user); });
}

void StreamLimiter::Release(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  --open_;
  auto it = by_user_.find(user);
  if (it != by_user_.end() && --it->second == 0) by_user_.erase(it);
}

}  // namespace gpusched::server
