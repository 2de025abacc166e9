#include "base/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace gpusched {
namespace {

TEST(ThreadPool, VisitsEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  EXPECT_EQ(pool.concurrency(), 4u);
}

// Two threads share one pool (the scheduler's pool and any other caller): each call still
// visits its own indices exactly once and returns. (Without the serialisation, the second
// call replaced the first one's job: indices lost or run twice, or a caller waiting forever.)
TEST(ThreadPool, TwoCallersAtOnceEachGetTheirOwnJob) {
  ThreadPool pool(3);
  std::atomic<int> ready{0};
  constexpr int kRounds = 2000;
  auto caller = [&](std::vector<std::atomic<int>>* hits) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (int round = 0; round < kRounds; ++round) {
      pool.ParallelFor(hits->size(), [hits](size_t i) {
        for (int spin = 0; spin < 200; ++spin) {  // a little work, not optimised away
          std::atomic_signal_fence(std::memory_order_seq_cst);
        }
        (*hits)[i].fetch_add(1);
      });
    }
  };
  std::vector<std::atomic<int>> a(16), b(23);
  std::thread other(caller, &b);
  caller(&a);
  other.join();
  for (auto& h : a) EXPECT_EQ(h.load(), kRounds);
  for (auto& h : b) EXPECT_EQ(h.load(), kRounds);
}

TEST(InlineExecutor, RunsInOrder) {
  InlineExecutor ex;
  std::vector<size_t> order;
  ex.ParallelFor(5, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace gpusched
