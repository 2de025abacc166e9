#pragma once
// CancelToken: lets one thread end another thread's blocked Acquire. Cancel() sets the token
// and runs every callback subscribed at that moment (a policy subscribes one that wakes its
// waiters), so a cancelled Acquire returns at once instead of at its next timer tick.
//
// Thread-safety: all methods are thread-safe. Callbacks run on the cancelling thread, under the
// token's lock: a callback must not call back into the token. After Unsubscribe returns, the
// callback is not running and never will, so the subscriber may go away.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace gpusched::dispatch {

class CancelToken {
 public:
  // Fires the token (idempotent) and runs the callbacks subscribed now.
  void Cancel();
  // Clears the token so it can serve another request. Subscribers are kept.
  void Reset();
  // Lock-free, so a policy may read it under its own lock while Cancel holds the token's.
  bool cancelled() const { return cancelled_.load(); }

  // Registers `fn` to run on Cancel. Returns its id (never 0).
  uint64_t Subscribe(std::function<void()> fn);
  void Unsubscribe(uint64_t id);

 private:
  mutable std::mutex mu_;
  std::atomic<bool> cancelled_{false};
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> callbacks_;
};

// Subscribes `fn` to `token` (may be null: nothing) for the life of this object.
class CancelSubscription {
 public:
  CancelSubscription(CancelToken* token, std::function<void()> fn);
  ~CancelSubscription();
  CancelSubscription(const CancelSubscription&) = delete;
  CancelSubscription& operator=(const CancelSubscription&) = delete;

 private:
  CancelToken* token_;
  uint64_t id_ = 0;
};

}  // namespace gpusched::dispatch
