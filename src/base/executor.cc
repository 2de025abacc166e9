#include "base/executor.h"

#include "base/check.h"

namespace gpusched {

ThreadPool::ThreadPool(size_t workers) {
  GS_CHECK(workers >= 1);
  for (size_t i = 1; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool ThreadPool::RunOne() {
  std::unique_lock lock(mu_);
  if (job_ == nullptr || next_ >= total_) return false;
  const size_t index = next_++;
  const auto* job = job_;
  lock.unlock();
  (*job)(index);
  lock.lock();
  if (++finished_ == total_) done_cv_.notify_all();
  return true;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
      if (stop_) return;
      seen = generation_;
    }
    while (RunOne()) {
    }
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  // Without this, a second caller would replace the job of the first while it runs: indices
  // skipped or run twice, and `finished_ == total_` never true for one of them (a hang).
  std::lock_guard call(call_mu_);
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    next_ = 0;
    total_ = n;
    finished_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  while (RunOne()) {
  }
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ == total_; });
  job_ = nullptr;
}

}  // namespace gpusched
