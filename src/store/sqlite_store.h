#pragma once
// SqliteStore: the default StateStore, one SQLite database (WAL mode) in the data directory.
//
// Durability: WAL with synchronous=FULL by default (`Options::fsync_every_commit`): a commit
// returns after the WAL is synced, so it survives power loss and an OS crash. With NORMAL a
// committed transaction is in the WAL file (not synced) before the call returns: it survives
// a crash of the process (kill -9), but power loss may lose the last transactions. Callers
// batch writes (the server's group commit), so FULL costs one fsync per group.
//
// One process at a time: the store holds an exclusive lock on the database from Open until
// it is destroyed (SQLite's EXCLUSIVE locking mode), so a second server started on the same
// data dir fails at start instead of writing the same state as the first. The lock also
// spares every transaction its lock calls and the WAL its shared-memory index.
//
// Thread-safety: all methods take one internal mutex.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/file_identity.h"
#include "store/state_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpusched::store {

class SqliteStore final : public StateStore {
 public:
  struct Options {
    bool fsync_every_commit = true;
    // The SQLite VFS to open the file through ("" = the default). Tests register a
    // fault-injecting one (store/testing/fault_vfs.h) to make writes, syncs and COMMIT fail.
    std::string vfs;
    // How long Open waits for another process to release the database (a server being
    // replaced on its data dir) before it fails with FailedPrecondition.
    int lock_wait_ms = 5000;
  };
  // Opens (creating or upgrading if needed) `path`. Errors name the path. A database whose
  // schema version is above SchemaVersion() is refused (FailedPrecondition).
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, Options options);
  // The schema this version writes (PRAGMA user_version); older ones are upgraded at Open.
  static int SchemaVersion();
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status Commit(const WriteBatch& batch) override;
  StatusOr<LiveTasks> LoadLiveTasks() override;
  StatusOr<TaskRecord> GetTask(uint64_t id) override;
  StatusOr<TaskPage> ListTasks(std::optional<std::string> state, uint64_t after_id,
                               size_t limit) override;
  StatusOr<std::map<std::string, int64_t>> CountTasksByState() override;
  StatusOr<std::optional<uint64_t>> LookupIdempotencyKey(const std::string& key) override;
  StatusOr<std::vector<NodeRecord>> LoadNodes() override;
  StatusOr<std::vector<LearnedPeak>> LoadLearnedPeaks() override;
  StatusOr<std::vector<TokenRecord>> LoadTokens() override;
  StatusOr<std::vector<core::TeamQuota>> LoadQuotas() override;
  StatusOr<std::vector<QuarantinedRow>> LoadQuarantine() override;
  StatusOr<std::vector<RollupRow>> LoadRollups(int64_t from_day, int64_t to_day) override;
  // SQLite's online backup API, in one step under the store's lock (commits wait for it):
  // the pages of one committed state. `path` must not exist; it is a SQLite database (synced)
  // that SqliteStore::Open reads.
  Status SnapshotTo(const std::string& path) override;
  // Issue 39: FailedPrecondition once the file at the path Open was given is not the file
  // this store has open (removed or replaced); every Commit checks it before writing.
  Status Health() override;
  // Issue 39: kept in the table `meta` (key 'cluster_id'), inserted when Open first finds
  // none (a new file, or one written before cluster ids) and read back from then on.
  const std::string& ClusterId() const override { return cluster_id_; }

 private:
  class Statement;
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  // REQUIRES: mu_ held (all of these).
  Status Exec(const char* sql);
  // The statement of `sql`, prepared on its first use and kept until the store closes
  // (nullptr when it does not prepare: Error() then names why). The statements of every
  // commit and lookup are these: preparing them anew each time (parsing the SQL, planning the
  // query) was about a tenth of the server's CPU in `bench e2e --executor noop`.
  sqlite3_stmt* Cached(const char* sql);
  // Runs a cached statement that returns no rows (BEGIN IMMEDIATE, COMMIT, ROLLBACK).
  Status ExecCached(const char* sql);
  Status Error(const std::string& what) const;
  Status Migrate();
  Status LoadClusterId();
  StatusOr<int> ReadSchemaVersion();
  Status WriteBatchLocked(const WriteBatch& batch);
  Status WritePeaksLocked(const WriteBatch& batch);   // learned and forgotten peaks
  Status WriteQuotasLocked(const WriteBatch& batch);  // set and removed quotas
  Status DeleteTasksLocked(const WriteBatch& batch);  // archived tasks (issue 38)
  // Runs the cached statement `sql` once per item of `items`, bound by bind(statement,
  // item); a failed step's error names what(item).
  template <typename Items, typename Bind, typename What>
  Status WriteEach(const char* sql, const Items& items, Bind bind, What what);
  Status Quarantine(const std::string& table, const std::string& key, const std::string& text,
                    const std::string& error);

  std::mutex mu_;
  sqlite3* db_ = nullptr;
  std::optional<FileIdentity> identity_;  // set by Open once the file is locked
  std::string cluster_id_;                // set by Open
  std::map<std::string, sqlite3_stmt*, std::less<>> cached_;  // mu_
};

}  // namespace gpusched::store
