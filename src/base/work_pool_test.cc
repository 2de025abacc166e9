#include "base/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace gpusched {
namespace {

TEST(WorkPool, OneThreadRunsInPostOrder) {
  std::vector<int> order;
  {
    WorkPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Post([&order, i] { order.push_back(i); });
  }  // the destructor runs everything posted, then joins
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(WorkPool, DestructorRunsEverythingPostedFromManyThreads) {
  std::atomic<int> ran{0};
  {
    WorkPool pool(4);
    EXPECT_EQ(pool.threads(), 4u);
    WorkPool posters(3);
    for (int p = 0; p < 3; ++p) {
      posters.Post([&] {
        for (int i = 0; i < 500; ++i) pool.Post([&] { ran.fetch_add(1); });
      });
    }
  }  // `posters` drains first (declared last), then `pool`
  EXPECT_EQ(ran.load(), 1500);
}

}  // namespace
}  // namespace gpusched
