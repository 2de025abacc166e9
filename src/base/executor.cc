#include "base/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>

#include "base/check.h"

namespace gpusched {
namespace {

// One ParallelFor call: the indices still to run, and the helpers still working.
struct Job {
  Job(const std::function<void(size_t)>& f, size_t count, size_t helpers)
      : fn(&f), n(count), helpers_left(helpers) {}

  const std::function<void(size_t)>* const fn;
  const size_t n;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable done_cv;
  size_t helpers_left;  // guarded by mu

  void Drain() {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) (*fn)(i);
  }
};

}  // namespace

ThreadPool::ThreadPool(size_t workers) {
  GS_CHECK(workers >= 1);
  if (workers > 1) helpers_ = std::make_unique<WorkPool>(workers - 1);
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  // One job at a time (the contract): a second caller would otherwise wait behind the
  // first one's helpers in the WorkPool's queue anyway.
  std::lock_guard call(call_mu_);
  const size_t helpers = helpers_ ? std::min(n - 1, helpers_->threads()) : 0;
  Job job(fn, n, helpers);
  for (size_t h = 0; h < helpers; ++h) {
    helpers_->Post([j = &job] {  // one pointer: no allocation in std::function
      j->Drain();
      std::lock_guard lock(j->mu);  // notify under the lock: `job` lives until the wait ends
      if (--j->helpers_left == 0) j->done_cv.notify_one();
    });
  }
  job.Drain();
  std::unique_lock lock(job.mu);
  job.done_cv.wait(lock, [&] { return job.helpers_left == 0; });
}

}  // namespace gpusched
