#pragma once
// WorkPool: threads that run posted closures in FIFO order; the one set of worker threads in
// the tree. `core` and `dispatch` start no threads of their own: a caller that wants
// RealtimeDispatcher::Submit lends a WorkPool (choosing how many requests may wait for a GPU
// at once), and ThreadPool (base/executor.h) runs its ParallelFor helpers on one.
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

namespace gpusched {

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

}  // namespace gpusched
