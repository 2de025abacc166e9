// Issue 38: the SQLite archive of finished tasks: append only, idempotent by id, read back by
// id and by finish time, across a reopen.
#include "store/task_archive.h"

#include <gtest/gtest.h>

#include "base/testing/test_dir.h"

namespace gpusched::store {
namespace {

TaskRecord Finished(uint64_t id, int64_t finished_ms, const std::string& user) {
  TaskRecord r;
  r.task.id = TaskId(id);
  r.task.spec.gpus = 1;
  r.task.spec.command = {"true"};
  r.task.spec.user = user;
  r.task.spec.team = "vision";
  r.task.state = core::TaskState::kSucceeded;
  r.task.finished_ms = finished_ms;
  return r;
}

TEST(TaskArchiveTest, Issue38_AppendIsIdempotentByIdAndReadsBackAfterAReopen) {
  gpusched::testing::TestDir dir{"gpusched_archive_test"};
  const std::string path = (dir / "archive.db").string();
  {
    auto a = SqliteArchive::Open(path);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE((*a)->Append({Finished(1, 1'000, "ann"), Finished(2, 5'000, "bob")}).ok());
    // Archived again after a crash before the store's delete: the first row stays.
    ASSERT_TRUE((*a)->Append({Finished(2, 9'999, "eve"), Finished(3, 7'000, "cyd")}).ok());
  }
  auto a = SqliteArchive::Open(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto two = (*a)->Get(2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->task.spec.user, "bob");
  EXPECT_EQ(two->task.finished_ms, 5'000);
  EXPECT_EQ((*a)->Get(4).status().code(), StatusCode::kNotFound);
  std::vector<uint64_t> seen;
  for (uint64_t after = 0;;) {
    auto page = (*a)->ListFinishedSince(5'000, after, 1);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const TaskRecord& r : page->tasks) seen.push_back(r.task.id.value());
    if (page->next_after_id == 0) break;
    after = page->next_after_id;
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 3}));
}

}  // namespace
}  // namespace gpusched::store
