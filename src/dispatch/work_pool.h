#pragma once
// WorkPool: threads that run posted closures in FIFO order. The dispatch layer starts no
// threads of its own; a caller that wants RealtimeDispatcher::Submit creates a WorkPool and
// lends it, choosing how many requests may wait for a GPU at once.
//
// Thread-safety: Post may be called from any thread. The destructor runs everything already
// posted, then joins.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpusched::dispatch {

class WorkPool {
 public:
  explicit WorkPool(size_t threads);  // REQUIRES: threads >= 1
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  void Post(std::function<void()> work);
  size_t threads() const { return threads_.size(); }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpusched::dispatch
