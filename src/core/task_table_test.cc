// TaskTable on its own (issue 40): ids, held submissions, the active and time-limited sets
// and the changed ids the store takes, without a scheduler.

#include "core/task_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace gpusched::core {
namespace {

Task NewTask(TaskTable& table, bool time_limited = false) {
  Task t;
  t.id = table.TakeId();
  if (time_limited) t.spec.time_limit_ms = 60'000;
  return t;
}

TEST(TaskTableTest, Issue40_IdsAscendAndRestoredIdsMustToo) {
  TaskTable table;
  EXPECT_EQ(table.Insert(NewTask(table)).id, TaskId(1));
  table.ReserveIdsBelow(10);
  EXPECT_EQ(table.Insert(NewTask(table)).id, TaskId(10));
  table.ReserveIdsBelow(5);  // never lowers
  EXPECT_EQ(table.next_id(), 11u);
  Task old;
  old.id = TaskId(7);
  const StatusOr<Task*> refused = table.InsertRestored(old);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("restored task 7 out of order (expected an id >= 11)"),
            std::string::npos)
      << refused.status().message();
  EXPECT_EQ(table.Find(TaskId(7)), nullptr);  // nothing changed
  old.id = TaskId(20);
  ASSERT_TRUE(table.InsertRestored(old).ok());
  EXPECT_EQ(table.next_id(), 21u);
  EXPECT_EQ(table.size(), 3u);
  std::vector<uint64_t> ids;
  for (const auto& [id, t] : table.records()) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 10, 20}));
}

TEST(TaskTableTest, Issue40_OneSetterKeepsActiveAndTimeLimitedTogether) {
  TaskTable table;
  Task& plain = table.Insert(NewTask(table));
  Task& limited = table.Insert(NewTask(table, /*time_limited=*/true));
  table.SetActive(plain, true);
  table.SetActive(limited, true);
  EXPECT_EQ(table.active(), (std::set<TaskId>{plain.id, limited.id}));
  EXPECT_EQ(table.time_limited(), (std::set<TaskId>{limited.id}));
  table.SetActive(limited, false);
  EXPECT_EQ(table.active(), (std::set<TaskId>{plain.id}));
  EXPECT_TRUE(table.time_limited().empty());
}

TEST(TaskTableTest, Issue40_HeldSubmissionsAreReleasedOnce) {
  TaskTable table;
  const TaskId id = table.Insert(NewTask(table)).id;
  table.Hold(id);
  EXPECT_TRUE(table.IsHeld(id));
  EXPECT_TRUE(table.Unhold(id));
  EXPECT_FALSE(table.Unhold(id));
  EXPECT_FALSE(table.IsHeld(id));
}

TEST(TaskTableTest, Issue40_ChangedIdsComeOnceAscendingWithoutErasedOnes) {
  TaskTable table;
  const TaskId a = table.Insert(NewTask(table)).id;
  const TaskId b = table.Insert(NewTask(table)).id;
  const TaskId c = table.Insert(NewTask(table)).id;
  table.MarkChanged(c);
  table.MarkChanged(a);
  table.MarkChanged(c);
  table.MarkChanged(b);
  table.Hold(b);
  table.Erase(b);  // withdrawn: its changes are not reported, it is held no more
  EXPECT_FALSE(table.IsHeld(b));
  EXPECT_EQ(table.Find(b), nullptr);
  EXPECT_EQ(table.TakeChanged(), (std::vector<TaskId>{a, c}));
  EXPECT_TRUE(table.TakeChanged().empty());
  table.MarkChanged(a);  // the erased list is cleared by a take: later changes count
  EXPECT_EQ(table.TakeChanged(), (std::vector<TaskId>{a}));
}

}  // namespace
}  // namespace gpusched::core
