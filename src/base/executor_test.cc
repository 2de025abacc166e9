#include "base/executor.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(InlineExecutor, RunsInOrder) {
  InlineExecutor ex;
  std::vector<size_t> order;
  ex.ParallelFor(5, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace gpusched
