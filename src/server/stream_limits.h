#pragma once
// Open streams (gRPC Watch, REST event and log streams) counted per user and in total, so
// no user, and no crowd of them, holds the server's threads (issue 36): each stream holds
// a thread for as long as it is open. Thread-safe.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace gpusched::server {

struct StreamLimits {
  size_t total = 64;     // server key stream_limit
  size_t per_user = 16;  // server key stream_limit_per_user
};

class StreamLimiter {
 public:
  explicit StreamLimiter(StreamLimits limits) : limits_(limits) {}
  // Holding the returned slot keeps one stream of `user` counted; dropping it ends that.
  // ResourceExhausted naming the limit (and its key) when `user` or everyone is at it.
  // The slot may outlive nothing: REQUIRES the limiter outlives every slot.
  using Slot = std::shared_ptr<void>;
  StatusOr<Slot> Acquire(const std::string& user);

 private:
  void Release(const std::string& user);
  const StreamLimits limits_;
  std::mutex mu_;
  size_t open_ = 0;
  std::map<std::string, size_t> by_user_;
};

}  // namespace gpusched::server
