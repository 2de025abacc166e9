#pragma once
// Executor: how a caller lends threads to `core` and `dispatch`, which start none of their
// own. ParallelFor(n, fn) calls fn(i) for every i in [0, n) and returns when all are done.
//
// InlineExecutor runs everything on the calling thread. ThreadPool works with the calling
// thread and `workers - 1` threads of a WorkPool (base/work_pool.h).
// Thread-safety: ParallelFor may be called from several threads; the calls on one ThreadPool
// run one after the other (the pool holds one job at a time). REQUIRES: `fn` does not call
// ParallelFor on the same pool (it would wait for itself).

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

#include "base/work_pool.h"

namespace gpusched {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual size_t concurrency() const = 0;
  virtual void ParallelFor(size_t n, const std::function<void(size_t)>& fn) = 0;
};

class InlineExecutor final : public Executor {
 public:
  size_t concurrency() const override { return 1; }
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn) override {
    for (size_t i = 0; i < n; ++i) fn(i);
  }
};

class ThreadPool final : public Executor {
 public:
  // REQUIRES: workers >= 1. The calling thread also works, so `workers - 1` threads start.
  explicit ThreadPool(size_t workers);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t concurrency() const override { return helpers_ ? helpers_->threads() + 1 : 1; }
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn) override;

 private:
  std::mutex call_mu_;  // held by the ParallelFor running; a second caller waits for it
  std::unique_ptr<WorkPool> helpers_;  // null for workers == 1
};

}  // namespace gpusched
