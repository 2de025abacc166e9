#pragma once
// TaskArchive (issue 38): where finished tasks go once they are older than the server's
// history_retention, before the StateStore deletes them (WriteBatch::deleted_tasks), so that
// the store (and etcd's quota) does not grow with every task ever run while `show` and `acct`
// still find them.
//
// Append only: a task is written once, with its record as the store kept it (record_codec
// JSON), and never changed. Append is idempotent by id (a crash between archiving and the
// store's delete leaves the task in both; archiving it again changes nothing), all or nothing,
// and durable when it returns OK: the caller deletes from the store only after that.
//
// Issue 38: each task also carries `rolled_up`: 1 when the store's rollup rows count it (the
// server writes them in the commit that deletes it from the store), so that `acct` reads only
// the others (0: archived by a version before rollups) from here. Append sets it.
//
// SqliteArchive: one table in its own SQLite file (DATA_DIR/archive.db), one row per task: id,
// user, team, state, finished_ms (wall clock), rolled_up, record. A file of an earlier version
// gains rolled_up (0 for every row) when it is opened. Thread-safety: safe from any thread.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/state_store.h"

struct sqlite3;

namespace gpusched::store {

class TaskArchive {
 public:
  virtual ~TaskArchive() = default;
  // Stores `tasks` (finished ones) in one transaction, marked rolled up; ids already archived
  // keep their record and are marked rolled up too (the caller writes their rows with their
  // deletion from the store, until which the store's copy is the one counted).
  virtual Status Append(const std::vector<TaskRecord>& tasks) = 0;
  // One archived task; NotFound when it is not archived.
  virtual StatusOr<TaskRecord> Get(uint64_t id) = 0;
  // Archived tasks that finished at or after `since_ms` with id > after_id, ascending id, at
  // most `limit` (next_after_id as in StateStore::ListTasks); with only_not_rolled_up, only
  // those no rollup row counts.
  virtual StatusOr<TaskPage> ListFinishedSince(int64_t since_ms, uint64_t after_id,
                                               size_t limit, bool only_not_rolled_up) = 0;
};

class SqliteArchive final : public TaskArchive {
 public:
  // Creates the file and its table when absent. Errors name the path.
  static StatusOr<std::unique_ptr<SqliteArchive>> Open(const std::string& path);
  ~SqliteArchive() override;
  SqliteArchive(const SqliteArchive&) = delete;
  SqliteArchive& operator=(const SqliteArchive&) = delete;

  Status Append(const std::vector<TaskRecord>& tasks) override;
  StatusOr<TaskRecord> Get(uint64_t id) override;
  StatusOr<TaskPage> ListFinishedSince(int64_t since_ms, uint64_t after_id, size_t limit,
                                       bool only_not_rolled_up) override;

 private:
  SqliteArchive(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const char* sql);  // REQUIRES: mu_ held
  Status Error(const std::string& what) const;
  Status InsertLocked(const std::vector<TaskRecord>& tasks);
  Status Migrate();  // REQUIRES: mu_ held

  std::mutex mu_;
  sqlite3* db_ = nullptr;
  const std::string path_;
};

}  // namespace gpusched::store
