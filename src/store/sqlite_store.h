#pragma once
// SqliteStore: the default StateStore, one SQLite database (WAL mode) in the data directory.
//
// Durability: WAL with synchronous=NORMAL. A committed transaction is in the WAL file before
// the call returns, so it survives a crash of the process (kill -9); an OS crash or power
// loss may lose the last transactions (synchronous=FULL would fsync every commit, at about a
// hundred commits per second on ordinary disks). `Options::fsync_every_commit` selects FULL.
//
// Thread-safety: all methods take one internal mutex.

#include <memory>
#include <mutex>
#include <string>

#include "store/state_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpusched::store {

class SqliteStore final : public StateStore {
 public:
  struct Options {
    bool fsync_every_commit = false;
  };
  // Opens (creating if needed) `path`. Errors name the path.
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, Options options);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status PutTasks(const std::vector<TaskRecord>& records) override;
  StatusOr<std::vector<TaskRecord>> LoadTasks() override;
  Status PutNode(const NodeRecord& node) override;
  StatusOr<std::vector<NodeRecord>> LoadNodes() override;
  Status AddMemoryObservation(const MemoryObservation& observation) override;
  StatusOr<std::vector<MemoryObservation>> LoadMemoryObservations() override;

 private:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  Status Error(const std::string& what) const;
  StatusOr<std::vector<std::string>> SelectTexts(const char* sql);

  std::mutex mu_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* put_task_ = nullptr;
};

}  // namespace gpusched::store
