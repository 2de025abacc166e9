// TaskIndex and ChangeLog (issue 40: split out of ControlPlane): the index by state and its
// counts, retention in finish order that waits for what may not leave yet, and the change log
// Watch reads.

#include "server/task_index.h"

#include <gtest/gtest.h>

#include "server/change_log.h"

namespace gpusched::server {
namespace {

using core::TaskState;
using Retire = TaskIndex::Retire;

TEST(TaskIndexTest, Issue40_AStateChangeMovesATaskAndTheCountsIncludeThoseThatLeft) {
  TaskIndex index;
  index.AddLeftFinished("succeeded", 40);  // restored from the store's counts
  index.Put(3, TaskState::kPending, 0);
  index.Put(1, TaskState::kPending, 0);
  index.Put(2, TaskState::kRunning, 0);
  EXPECT_EQ(index.InState(TaskState::kPending), (std::set<uint64_t>{1, 3}));
  index.Put(3, TaskState::kRunning, 0);
  EXPECT_EQ(index.InState(TaskState::kPending), (std::set<uint64_t>{1}));
  EXPECT_EQ(index.InState(TaskState::kRunning), (std::set<uint64_t>{2, 3}));
  EXPECT_TRUE(index.InState(TaskState::kFailed).empty());
  index.Put(2, TaskState::kSucceeded, 10);
  index.Remove(2, /*left_finished=*/true);
  index.Remove(1, /*left_finished=*/false);  // withdrawn: never counted
  const std::map<std::string, int64_t> counts = index.CountsByState();
  EXPECT_EQ(counts.at("succeeded"), 41);
  EXPECT_EQ(counts.at("running"), 1);
  EXPECT_EQ(counts.at("pending"), 0);
}

TEST(TaskIndexTest, Issue40_RetentionGoesInFinishOrderByCountThenAgeAndWaitsForTheDurable) {
  TaskIndex index;
  for (uint64_t id = 1; id <= 5; ++id) index.Put(id, TaskState::kRunning, 0);
  index.Put(4, TaskState::kSucceeded, 100);  // finish order 4, 2, 5, 1
  index.Put(2, TaskState::kFailed, 200);
  index.Put(5, TaskState::kCancelled, 300);
  index.Put(1, TaskState::kSucceeded, 400);
  std::vector<uint64_t> offered;
  std::set<uint64_t> not_durable = {5};
  auto retire = [&](uint64_t id) {
    offered.push_back(id);
    if (not_durable.count(id)) return Retire::kWait;
    index.Remove(id, true);
    return Retire::kRetired;
  };
  index.ApplyRetention(/*now=*/500, /*keep=*/2, /*keep_ms=*/10'000, retire);
  EXPECT_EQ(offered, (std::vector<uint64_t>{4, 2}));  // 4 held, keep 2: two leave
  offered.clear();
  index.ApplyRetention(500, 0, 10'000, retire);  // keep none: 5 waits, and 1 behind it
  EXPECT_EQ(offered, (std::vector<uint64_t>{5}));
  not_durable.clear();
  offered.clear();
  index.ApplyRetention(600, 10, /*keep_ms=*/150, retire);  // by age: both over 150 ms
  EXPECT_EQ(offered, (std::vector<uint64_t>{5, 1}));
  EXPECT_TRUE(index.InState(TaskState::kSucceeded).empty());
}

TEST(TaskIndexTest, Issue40_ATaskThatRanAgainLeavesTheRetentionOrderUnoffered) {
  TaskIndex index;
  index.Put(7, TaskState::kFailed, 0);
  index.Put(7, TaskState::kPending, 1);  // retried
  index.Put(8, TaskState::kSucceeded, 2);
  std::vector<uint64_t> offered;
  index.ApplyRetention(1'000, 0, 0, [&](uint64_t id) {
    offered.push_back(id);
    return Retire::kGone;
  });
  EXPECT_EQ(offered, (std::vector<uint64_t>{8}));
  EXPECT_EQ(index.InState(TaskState::kPending), (std::set<uint64_t>{7}));
}

TEST(ChangeLogTest, Issue40_EachSealedFlushIsAVersionAndALaggingReaderReadsEverything) {
  ChangeLog log(/*capacity=*/4);
  EXPECT_FALSE(log.Seal());  // nothing changed: no version
  log.Add(5);
  log.Add(3);
  log.Add(5);
  EXPECT_TRUE(log.Seal());
  EXPECT_EQ(log.version(), 1u);
  bool everything = true;
  EXPECT_EQ(log.Since(0, everything), (std::vector<uint64_t>{3, 5}));
  EXPECT_FALSE(everything);
  log.Add(9);
  log.Add(10);
  ASSERT_TRUE(log.Seal());  // 5 entries: the oldest of version 1 goes
  EXPECT_EQ(log.Since(1, everything), (std::vector<uint64_t>{9, 10}));
  EXPECT_FALSE(everything);
  log.Since(0, everything);
  EXPECT_FALSE(everything);  // version 1 still has entries in the log
  log.Add(11);
  log.Add(12);
  ASSERT_TRUE(log.Seal());  // version 1 is gone entirely
  const std::vector<uint64_t> ids = log.Since(0, everything);
  EXPECT_TRUE(everything);
  EXPECT_EQ(ids, (std::vector<uint64_t>{9, 10, 11, 12}));
  EXPECT_TRUE(log.Since(log.version(), everything).empty());
}

}  // namespace
}  // namespace gpusched::server
