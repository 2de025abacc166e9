// Issue 38: the SQLite archive of finished tasks: append only, idempotent by id, read back by
// id and by finish time, across a reopen.
#include "store/task_archive.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "base/testing/test_dir.h"
#include "store/record_codec.h"

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
    auto page = (*a)->ListFinishedSince(5'000, after, 1, false);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const TaskRecord& r : page->tasks) seen.push_back(r.task.id.value());
    if (page->next_after_id == 0) break;
    after = page->next_after_id;
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 3}));
}

// A file of the version before rollups: its table gains rolled_up = 0 at open, so its tasks
// are listed for acct; archiving one again (after a crash before the store's delete) marks it,
// as every task this version appends.
TEST(TaskArchiveTest, Issue38_AFileWithoutRolledUpIsMigratedAndItsTasksListedUntilMarked) {
  gpusched::testing::TestDir dir{"gpusched_archive_test"};
  const std::string path = (dir / "archive.db").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string old =
      "CREATE TABLE archived_tasks (id INTEGER PRIMARY KEY, user TEXT NOT NULL, team TEXT NOT "
      "NULL, state TEXT NOT NULL, finished_ms INTEGER NOT NULL, record TEXT NOT NULL);"
      "INSERT INTO archived_tasks VALUES (1, 'ann', 'vision', 'succeeded', 1000, '" +
      EncodeTask(Finished(1, 1'000, "ann")) + "')";
  ASSERT_EQ(sqlite3_exec(db, old.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto a = SqliteArchive::Open(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto ids = [&](bool only_not_rolled_up) {
    std::vector<uint64_t> out;
    auto page = (*a)->ListFinishedSince(0, 0, 10, only_not_rolled_up);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    for (const TaskRecord& r : page.ok() ? page->tasks : std::vector<TaskRecord>{}) {
      out.push_back(r.task.id.value());
    }
    return out;
  };
  EXPECT_EQ(ids(true), (std::vector<uint64_t>{1}));
  ASSERT_TRUE((*a)->Append({Finished(2, 2'000, "bob")}).ok());
  EXPECT_EQ(ids(true), (std::vector<uint64_t>{1})) << "appended, so counted by rollup rows";
  EXPECT_EQ(ids(false), (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE((*a)->Append({Finished(1, 1'000, "ann")}).ok());
  EXPECT_TRUE(ids(true).empty());
}

}  // namespace
}  // namespace gpusched::store
