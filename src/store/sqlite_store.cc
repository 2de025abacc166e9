#include "store/sqlite_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "base/cluster_id.h"
#include "base/log.h"
#include "store/record_codec.h"

namespace gpusched::store {
namespace {

// `state` is the task's state name, kept beside the record so listings by state and the
// per-state counts come from an index instead of decoding every row.
constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY, record TEXT NOT NULL, state TEXT);
  CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state, id);
  CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS idempotency_keys (key TEXT PRIMARY KEY, task_id INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS learned_peaks (
    profile TEXT PRIMARY KEY, max_peak_mib INTEGER NOT NULL, observations INTEGER NOT NULL,
    recent TEXT NOT NULL DEFAULT '');
  CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS quotas (
    team TEXT PRIMARY KEY, guaranteed_gpus INTEGER NOT NULL,
    guaranteed_gpu_mem_mib INTEGER NOT NULL, borrow_gpus INTEGER NOT NULL,
    max_priority TEXT NOT NULL DEFAULT '');
  CREATE TABLE IF NOT EXISTS quarantine (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, key TEXT NOT NULL,
    record TEXT, error TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS rollups (
    day INTEGER NOT NULL, team TEXT NOT NULL, user TEXT NOT NULL, failure TEXT NOT NULL,
    record TEXT NOT NULL, PRIMARY KEY (day, team, user, failure));
)sql";

constexpr const char* kLiveStates = "('pending', 'assigned', 'running')";

// Issue 38: the largest task id ever stored, kept in `meta` before archived tasks are deleted
// (MAX(id) of what is left could be smaller, and an id must never be handed out twice).
constexpr const char* kMaxIdStored = R"sql(
  SELECT MAX(COALESCE((SELECT MAX(id) FROM tasks), 0),
             COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'max_task_id'), 0)))sql";

}  // namespace

// A prepared statement for one use: its own, finalized at the end, or one of the store's
// cached ones (SqliteStore::Cached), reset and unbound at the end so that it holds no read
// transaction and no bound text between uses. Errors are reported by the caller through
// SqliteStore::Error, which reads the connection's last message.
class SqliteStore::Statement {
 public:
  Statement(sqlite3* db, const char* sql) : owned_(true) {
    ok_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) == SQLITE_OK;
  }
  explicit Statement(sqlite3_stmt* cached) : s_(cached), ok_(cached != nullptr), owned_(false) {}
  ~Statement() {
    if (owned_) {
      sqlite3_finalize(s_);
    } else if (s_ != nullptr) {
      Reset();
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return ok_; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  int Step() { return sqlite3_step(s_); }
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  int64_t Int(int col) { return sqlite3_column_int64(s_, col); }
  std::string Text(int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p != nullptr ? std::string(p, sqlite3_column_bytes(s_, col)) : std::string();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  bool ok_ = false;
  bool owned_ = false;
};

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                         Options options) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      options.vfs.empty() ? nullptr : options.vfs.c_str()) != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("store: cannot open " + path + ": " + msg);
  }
  std::unique_ptr<SqliteStore> s(new SqliteStore(db));
  std::lock_guard<std::mutex> lock(s->mu_);
  // The exclusive lock is taken here and held until close: before the first access in WAL
  // mode, so the WAL index lives in this process's memory (no -shm file).
  sqlite3_busy_timeout(db, options.lock_wait_ms);
  GS_RETURN_IF_ERROR(s->Exec("PRAGMA locking_mode=EXCLUSIVE"));
  if (Status held = s->Exec("BEGIN EXCLUSIVE; COMMIT"); !held.ok()) {
    if (sqlite3_errcode(db) != SQLITE_BUSY) return held;
    return FailedPrecondition("store: " + path +
                              " is in use by another process (a server on the same data dir?)");
  }
  sqlite3_busy_timeout(db, 5000);
  GS_RETURN_IF_ERROR(s->Exec("PRAGMA journal_mode=WAL"));
  GS_RETURN_IF_ERROR(s->Exec(options.fsync_every_commit ? "PRAGMA synchronous=FULL"
                                                        : "PRAGMA synchronous=NORMAL"));
  GS_RETURN_IF_ERROR(s->Migrate());
  GS_RETURN_IF_ERROR(s->LoadClusterId());
  // Issue 39: the file now locked and migrated is the one every commit must still find there.
  GS_ASSIGN_OR_RETURN(FileIdentity identity, FileIdentity::Record(path));
  s->identity_.emplace(identity);
  return s;
}

// Issue 39: the first Open of a store (a new file, or one of a version before cluster ids:
// the table is created IF NOT EXISTS, so the schema version stays 1) inserts a new id; every
// Open reads back the one stored.
Status SqliteStore::LoadClusterId() {
  GS_ASSIGN_OR_RETURN(const std::string fresh, NewClusterId());
  {
    Statement put(db_, "INSERT OR IGNORE INTO meta (key, value) VALUES ('cluster_id', ?)");
    if (!put.ok()) return Error("prepare");
    put.Bind(1, fresh);
    if (put.Step() != SQLITE_DONE) return Error("write the cluster id");
  }
  Statement get(db_, "SELECT value FROM meta WHERE key = 'cluster_id'");
  if (!get.ok() || get.Step() != SQLITE_ROW) return Error("read the cluster id");
  cluster_id_ = get.Text(0);
  return ValidateClusterId(cluster_id_, "store: meta.cluster_id");
}

Status SqliteStore::Health() {
  return identity_ ? identity_->Check() : Status::Ok();
}

SqliteStore::~SqliteStore() {
  for (auto& [sql, stmt] : cached_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* SqliteStore::Cached(const char* sql) {
  if (auto it = cached_.find(std::string_view(sql)); it != cached_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return nullptr;
  }
  cached_.emplace(sql, stmt);
  return stmt;
}

Status SqliteStore::ExecCached(const char* sql) {
  Statement st(Cached(sql));
  if (!st.ok() || st.Step() != SQLITE_DONE) {
    return Internal(std::string("store: ") + sqlite3_errmsg(db_));
  }
  return Status::Ok();
}

Status SqliteStore::Error(const std::string& what) const {
  return Internal("store: " + what + ": " + sqlite3_errmsg(db_));
}

Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return Internal(std::string("store: ") + msg);
  }
  return Status::Ok();
}

// The schema version, kept in the database header (PRAGMA user_version). 0: a database of a
// version before schema versions, upgraded by the probes below; 1: kSchema as it is now (the
// tables added since, `meta` and issue 38's `rollups`, came with CREATE TABLE IF NOT EXISTS,
// which needs no new version: docs/upgrades.md rule 7). A
// change of the schema adds a step `if (version < N)` and raises kSchemaVersion to N
// (docs/upgrades.md). A database of a higher version (a newer server wrote it) is refused,
// never written: this version would not keep what the newer one added.
int SqliteStore::SchemaVersion() { return 1; }

StatusOr<int> SqliteStore::ReadSchemaVersion() {
  Statement st(db_, "PRAGMA user_version");
  if (!st.ok() || st.Step() != SQLITE_ROW) return Error("read the schema version");
  return static_cast<int>(st.Int(0));
}

// Databases of the first version: tasks without the state column (NULL state rows are loaded
// as live and get their state on their next write) and one row per memory observation.
Status SqliteStore::Migrate() {
  GS_ASSIGN_OR_RETURN(const int version, ReadSchemaVersion());
  if (version > SchemaVersion()) {
    return FailedPrecondition(
        "store: schema version " + std::to_string(version) + " is newer than this server's " +
        std::to_string(SchemaVersion()) +
        ": a newer gpusched wrote it; run that version, or restore a backup taken before the "
        "upgrade (docs/upgrades.md)");
  }
  {
    Statement probe(db_, "SELECT state FROM tasks LIMIT 0");
    Statement old_tasks(db_, "SELECT id FROM tasks LIMIT 0");
    if (!probe.ok() && old_tasks.ok()) {
      GS_RETURN_IF_ERROR(Exec("ALTER TABLE tasks ADD COLUMN state TEXT"));
    }
  }
  // Issue 36: the learned peaks of older versions are the largest ever reported, by tasks
  // that could write them: dropped, not carried over (the table's rows apply again until
  // measured peaks arrive). Quotas gain their granted priority class ('' = none of its own).
  {
    Statement recent(db_, "SELECT recent FROM learned_peaks LIMIT 0");
    Statement old_learned(db_, "SELECT profile FROM learned_peaks LIMIT 0");
    if (!recent.ok() && old_learned.ok()) {
      GS_RETURN_IF_ERROR(Exec("BEGIN; DELETE FROM learned_peaks; ALTER TABLE learned_peaks "
                              "ADD COLUMN recent TEXT NOT NULL DEFAULT ''; COMMIT"));
    }
    Statement grant(db_, "SELECT max_priority FROM quotas LIMIT 0");
    Statement old_quotas(db_, "SELECT team FROM quotas LIMIT 0");
    if (!grant.ok() && old_quotas.ok()) {
      GS_RETURN_IF_ERROR(
          Exec("ALTER TABLE quotas ADD COLUMN max_priority TEXT NOT NULL DEFAULT ''"));
    }
  }
  GS_RETURN_IF_ERROR(Exec(kSchema));
  Statement old_peaks(db_, "SELECT profile FROM memory_peaks LIMIT 0");
  if (old_peaks.ok()) GS_RETURN_IF_ERROR(Exec("DROP TABLE memory_peaks"));
  if (version < SchemaVersion()) {
    const std::string set = "PRAGMA user_version=" + std::to_string(SchemaVersion());
    GS_RETURN_IF_ERROR(Exec(set.c_str()));
  }
  return Status::Ok();
}

Status SqliteStore::Commit(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  GS_RETURN_IF_ERROR(Health());  // nothing goes into a file that is no longer the store's
  std::lock_guard<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(ExecCached("BEGIN IMMEDIATE"));
  Status s = WriteBatchLocked(batch);
  if (s.ok()) s = ExecCached("COMMIT");
  // A failed statement or COMMIT leaves the transaction open (or half applied in the page
  // cache): roll back so nothing of the batch is visible and the next batch starts clean.
  if (!s.ok() && !sqlite3_get_autocommit(db_)) (void)ExecCached("ROLLBACK");
  return s;
}

template <typename Items, typename Bind, typename What>
Status SqliteStore::WriteEach(const char* sql, const Items& items, Bind bind, What what) {
  Statement st(Cached(sql));
  if (!st.ok()) return Error("prepare");
  for (const auto& item : items) {
    st.Reset();
    bind(st, item);
    if (st.Step() != SQLITE_DONE) return Error(what(item));
  }
  return Status::Ok();
}

Status SqliteStore::WriteBatchLocked(const WriteBatch& batch) {
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO tasks (id, record, state) VALUES (?, ?, ?)", batch.tasks,
      [](Statement& st, const TaskRecord& r) {
        st.Bind(1, static_cast<int64_t>(r.task.id.value()));
        st.Bind(2, EncodeTask(r));
        st.Bind(3, std::string(core::TaskStateName(r.task.state)));
      },
      [](const TaskRecord& r) { return "write task " + r.task.id.ToString(); }));
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO nodes (name, record) VALUES (?, ?)", batch.nodes,
      [](Statement& st, const NodeRecord& n) {
        st.Bind(1, n.spec.name);
        st.Bind(2, EncodeNode(n));
      },
      [](const NodeRecord& n) { return "write node " + n.spec.name; }));
  GS_RETURN_IF_ERROR(WriteEach(
      "DELETE FROM nodes WHERE name = ?", batch.removed_nodes,
      [](Statement& st, const std::string& name) { st.Bind(1, name); },
      [](const std::string& name) { return "delete node " + name; }));
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR IGNORE INTO idempotency_keys (key, task_id) VALUES (?, ?)",
      batch.idempotency_keys,
      [](Statement& st, const auto& key_id) {
        st.Bind(1, key_id.first);
        st.Bind(2, static_cast<int64_t>(key_id.second));
      },
      [](const auto&) { return std::string("write idempotency key"); }));
  GS_RETURN_IF_ERROR(WritePeaksLocked(batch));
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO tokens (id, record) VALUES (?, ?)", batch.tokens,
      [](Statement& st, const TokenRecord& t) {
        st.Bind(1, t.id);
        st.Bind(2, EncodeToken(t));
      },
      [](const TokenRecord& t) { return "write token " + t.id; }));
  GS_RETURN_IF_ERROR(WriteEach(
      "DELETE FROM tokens WHERE id = ?", batch.revoked_tokens,
      [](Statement& st, const std::string& id) { st.Bind(1, id); },
      [](const std::string& id) { return "delete token " + id; }));
  GS_RETURN_IF_ERROR(DeleteTasksLocked(batch));
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO rollups (day, team, user, failure, record) VALUES (?, ?, ?, ?, ?)",
      batch.rollups,
      [](Statement& st, const RollupRow& r) {
        st.Bind(1, r.day);
        st.Bind(2, r.team);
        st.Bind(3, r.user);
        st.Bind(4, r.failure);
        st.Bind(5, EncodeRollup(r));
      },
      [](const RollupRow& r) { return "write rollup of day " + std::to_string(r.day); }));
  return WriteQuotasLocked(batch);
}

// Issue 38: archived tasks leave the table; the largest id stays in `meta`.
Status SqliteStore::DeleteTasksLocked(const WriteBatch& batch) {
  if (batch.deleted_tasks.empty()) return Status::Ok();
  const std::string keep_max =
      std::string("INSERT OR REPLACE INTO meta (key, value) SELECT 'max_task_id', CAST((") +
      kMaxIdStored + ") AS TEXT)";
  GS_RETURN_IF_ERROR(Exec(keep_max.c_str()));
  GS_RETURN_IF_ERROR(WriteEach(
      "DELETE FROM tasks WHERE id = ?", batch.deleted_tasks,
      [](Statement& st, uint64_t id) { st.Bind(1, static_cast<int64_t>(id)); },
      [](uint64_t id) { return "delete task " + std::to_string(id); }));
  // Their idempotency keys: one pass over the keys (no index by task id, so the schema stays
  // the same) for the whole batch.
  std::string sql = "DELETE FROM idempotency_keys WHERE task_id IN (";
  for (size_t i = 0; i < batch.deleted_tasks.size(); ++i) sql += i == 0 ? "?" : ", ?";
  sql += ")";
  Statement keys(db_, sql.c_str());
  if (!keys.ok()) return Error("prepare");
  for (size_t i = 0; i < batch.deleted_tasks.size(); ++i) {
    keys.Bind(static_cast<int>(i) + 1, static_cast<int64_t>(batch.deleted_tasks[i]));
  }
  if (keys.Step() != SQLITE_DONE) return Error("delete the idempotency keys of archived tasks");
  return Status::Ok();
}

Status SqliteStore::WritePeaksLocked(const WriteBatch& batch) {
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO learned_peaks (profile, max_peak_mib, observations, recent) "
      "VALUES (?, ?, ?, ?)",
      batch.peaks,
      [](Statement& st, const LearnedPeak& p) {
        st.Bind(1, EncodeProfile(p.profile));
        MiB max_peak = 0;  // for readers of the older schema
        for (MiB m : p.recent_mib) max_peak = std::max(max_peak, m);
        st.Bind(2, max_peak);
        st.Bind(3, p.observations);
        st.Bind(4, EncodePeaks(p.recent_mib));
      },
      [](const LearnedPeak&) { return std::string("write learned peak"); }));
  return WriteEach(
      "DELETE FROM learned_peaks WHERE profile = ?", batch.forgotten_peaks,
      [](Statement& st, const core::MemoryProfile& p) { st.Bind(1, EncodeProfile(p)); },
      [](const core::MemoryProfile&) { return std::string("delete learned peak"); });
}

Status SqliteStore::WriteQuotasLocked(const WriteBatch& batch) {
  GS_RETURN_IF_ERROR(WriteEach(
      "INSERT OR REPLACE INTO quotas (team, guaranteed_gpus, guaranteed_gpu_mem_mib, "
      "borrow_gpus, max_priority) VALUES (?, ?, ?, ?, ?)",
      batch.quotas,
      [](Statement& st, const core::TeamQuota& q) {
        st.Bind(1, q.team);
        st.Bind(2, q.guaranteed_gpus);
        st.Bind(3, q.guaranteed_gpu_mem_mib);
        st.Bind(4, q.borrow_gpus);
        st.Bind(5, q.max_priority);
      },
      [](const core::TeamQuota& q) { return "write quota of team " + q.team; }));
  return WriteEach(
      "DELETE FROM quotas WHERE team = ?", batch.removed_quotas,
      [](Statement& st, const std::string& team) { st.Bind(1, team); },
      [](const std::string& team) { return "delete quota of team " + team; });
}

Status SqliteStore::Quarantine(const std::string& table, const std::string& key,
                               const std::string& text, const std::string& error) {
  GS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Statement keep(db_, "INSERT INTO quarantine (tbl, key, record, error) VALUES (?, ?, ?, ?)");
  Statement drop(db_, table == "tasks" ? "DELETE FROM tasks WHERE id = ?"
                                       : "DELETE FROM nodes WHERE name = ?");
  bool ok = keep.ok() && drop.ok();
  if (ok) {
    keep.Bind(1, table);
    keep.Bind(2, key);
    keep.Bind(3, text);
    keep.Bind(4, error);
    if (table == "tasks") {
      drop.Bind(1, static_cast<int64_t>(std::stoull(key)));
    } else {
      drop.Bind(1, key);
    }
    ok = keep.Step() == SQLITE_DONE && drop.Step() == SQLITE_DONE;
  }
  if (!ok) {
    Status s = Error("quarantine " + table + " " + key);
    (void)Exec("ROLLBACK");
    return s;
  }
  return Exec("COMMIT");
}

StatusOr<LiveTasks> SqliteStore::LoadLiveTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  LiveTasks out;
  {
    Statement max(db_, kMaxIdStored);
    if (!max.ok() || max.Step() != SQLITE_ROW) return Error("read max task id");
    out.max_id = static_cast<uint64_t>(max.Int(0));
  }
  std::vector<std::pair<int64_t, std::string>> rows;
  {
    const std::string sql = std::string("SELECT id, record FROM tasks WHERE state IS NULL OR ") +
                            "state IN " + kLiveStates + " ORDER BY id";
    Statement q(db_, sql.c_str());
    if (!q.ok()) return Error("prepare");
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) rows.emplace_back(q.Int(0), q.Text(1));
    if (rc != SQLITE_DONE) return Error("read tasks");
  }
  for (auto& [id, text] : rows) {
    StatusOr<TaskRecord> r = DecodeTask(text);
    if (r.ok() && r->task.id.value() != static_cast<uint64_t>(id)) {
      r = DataLoss("task: the record says id " + r->task.id.ToString() + " in row " +
                   std::to_string(id));
    }
    if (!r.ok()) {
      GS_RETURN_IF_ERROR(Quarantine("tasks", std::to_string(id), text, r.status().message()));
      out.quarantined.push_back({"tasks", std::to_string(id), r.status().message()});
      continue;
    }
    if (!core::IsTerminal(r->task.state)) out.tasks.push_back(std::move(r).value());
  }
  return out;
}

StatusOr<TaskRecord> SqliteStore::GetTask(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(Cached("SELECT record FROM tasks WHERE id = ?"));
  if (!q.ok()) return Error("prepare");
  q.Bind(1, static_cast<int64_t>(id));
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return NotFound("task " + std::to_string(id) + ": no such task");
  if (rc != SQLITE_ROW) return Error("read task " + std::to_string(id));
  return DecodeTask(q.Text(0));
}

StatusOr<TaskPage> SqliteStore::ListTasks(std::optional<std::string> state, uint64_t after_id,
                                          size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(Cached(state ? "SELECT record FROM tasks WHERE state = ? AND id > ? ORDER BY id LIMIT ?"
                           : "SELECT record FROM tasks WHERE id > ? ORDER BY id LIMIT ?"));
  if (!q.ok()) return Error("prepare");
  int arg = 1;
  if (state) q.Bind(arg++, *state);
  q.Bind(arg++, static_cast<int64_t>(after_id));
  q.Bind(arg, static_cast<int64_t>(limit) + 1);  // one more: is there a next page?
  TaskPage page;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    if (page.tasks.size() == limit) {
      page.next_after_id = page.tasks.back().task.id.value();
      break;
    }
    StatusOr<TaskRecord> r = DecodeTask(q.Text(0));
    if (!r.ok()) continue;  // quarantined at the next start; a listing skips it
    page.tasks.push_back(std::move(r).value());
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("list tasks");
  return page;
}

StatusOr<std::map<std::string, int64_t>> SqliteStore::CountTasksByState() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(Cached("SELECT COALESCE(state, 'unknown'), COUNT(*) FROM tasks GROUP BY state"));
  if (!q.ok()) return Error("prepare");
  std::map<std::string, int64_t> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out[q.Text(0)] += q.Int(1);
  if (rc != SQLITE_DONE) return Error("count tasks");
  return out;
}

StatusOr<std::optional<uint64_t>> SqliteStore::LookupIdempotencyKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(Cached("SELECT task_id FROM idempotency_keys WHERE key = ?"));
  if (!q.ok()) return Error("prepare");
  q.Bind(1, key);
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<uint64_t>();
  if (rc != SQLITE_ROW) return Error("read idempotency key");
  return std::optional<uint64_t>(static_cast<uint64_t>(q.Int(0)));
}

StatusOr<std::vector<NodeRecord>> SqliteStore::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> rows;
  {
    Statement q(db_, "SELECT name, record FROM nodes ORDER BY name");
    if (!q.ok()) return Error("prepare");
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) rows.emplace_back(q.Text(0), q.Text(1));
    if (rc != SQLITE_DONE) return Error("read nodes");
  }
  std::vector<NodeRecord> out;
  for (const auto& [name, text] : rows) {
    StatusOr<NodeRecord> r = DecodeNode(text);
    if (!r.ok()) {  // the agent registers the node again when it reconnects
      GS_RETURN_IF_ERROR(Quarantine("nodes", name, text, r.status().message()));
      continue;
    }
    out.push_back(std::move(r).value());
  }
  return out;
}

StatusOr<std::vector<LearnedPeak>> SqliteStore::LoadLearnedPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(db_, "SELECT profile, recent, observations FROM learned_peaks ORDER BY profile");
  if (!q.ok()) return Error("prepare");
  std::vector<LearnedPeak> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    StatusOr<core::MemoryProfile> profile = DecodeProfile(q.Text(0));
    StatusOr<std::vector<MiB>> recent = DecodePeaks(q.Text(1));
    if (!profile.ok() || !recent.ok()) continue;  // a lost row only costs an estimate
    out.push_back({*profile, std::move(recent).value(), q.Int(2)});
  }
  if (rc != SQLITE_DONE) return Error("read learned peaks");
  return out;
}

// A token row that does not decode is skipped with a message: it cannot authenticate anyone,
// and an admin can create another.
StatusOr<std::vector<TokenRecord>> SqliteStore::LoadTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(db_, "SELECT id, record FROM tokens ORDER BY id");
  if (!q.ok()) return Error("prepare");
  std::vector<TokenRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    StatusOr<TokenRecord> t = DecodeToken(q.Text(1));
    if (!t.ok()) {
      logging::Warn("store", "ignored token " + std::string(q.Text(0)) + ": " +
                                 t.status().message());
      continue;
    }
    out.push_back(std::move(t).value());
  }
  if (rc != SQLITE_DONE) return Error("read tokens");
  return out;
}

StatusOr<std::vector<core::TeamQuota>> SqliteStore::LoadQuotas() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(db_, "SELECT team, guaranteed_gpus, guaranteed_gpu_mem_mib, borrow_gpus, "
                   "max_priority FROM quotas ORDER BY team");
  if (!q.ok()) return Error("prepare");
  std::vector<core::TeamQuota> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back({q.Text(0), q.Int(1), q.Int(2), q.Int(3), q.Text(4)});
  }
  if (rc != SQLITE_DONE) return Error("read quotas");
  return out;
}

StatusOr<std::vector<RollupRow>> SqliteStore::LoadRollups(int64_t from_day, int64_t to_day) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(db_, "SELECT record FROM rollups WHERE day >= ? AND day < ? "
                   "ORDER BY day, team, user, failure");
  if (!q.ok()) return Error("prepare");
  q.Bind(1, from_day);
  q.Bind(2, to_day);
  std::vector<RollupRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    StatusOr<RollupRow> row = DecodeRollup(q.Text(0));
    if (!row.ok()) {  // lost, as a quota or token that does not decode; the rest counts
      logging::Warn("store", "ignored rollup row: " + row.status().message());
      continue;
    }
    out.push_back(std::move(row).value());
  }
  if (rc != SQLITE_DONE) return Error("read rollups");
  return out;
}

StatusOr<std::vector<QuarantinedRow>> SqliteStore::LoadQuarantine() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement q(db_, "SELECT tbl, key, error FROM quarantine ORDER BY seq");
  if (!q.ok()) return Error("prepare");
  std::vector<QuarantinedRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back({q.Text(0), q.Text(1), q.Text(2)});
  if (rc != SQLITE_DONE) return Error("read quarantine");
  return out;
}

Status SqliteStore::SnapshotTo(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) {
    return FailedPrecondition("backup: " + path + " exists (a snapshot is only written anew)");
  }
  sqlite3* dest = nullptr;
  if (sqlite3_open_v2(path.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    std::string msg = dest != nullptr ? sqlite3_errmsg(dest) : "out of memory";
    sqlite3_close(dest);
    unlink(path.c_str());
    return Unavailable("backup: cannot create " + path + ": " + msg);
  }
  int rc = SQLITE_OK;
  {
    std::lock_guard<std::mutex> lock(mu_);  // no commit runs while the pages are copied
    sqlite3_backup* b = sqlite3_backup_init(dest, "main", db_, "main");
    if (b == nullptr) {
      rc = sqlite3_errcode(dest);
    } else {
      rc = sqlite3_backup_step(b, -1);  // every page, in one step
      const int finished = sqlite3_backup_finish(b);
      if (rc == SQLITE_DONE) rc = finished;
    }
  }
  // The destination is in rollback-journal mode with synchronous=FULL: synced by its commit.
  std::string msg = rc == SQLITE_OK ? "" : sqlite3_errstr(rc);
  if (sqlite3_close(dest) != SQLITE_OK && msg.empty()) msg = "close failed";
  if (!msg.empty()) {
    unlink(path.c_str());
    return Unavailable("backup: copying the store to " + path + " failed: " + msg);
  }
  return Status::Ok();
}

}  // namespace gpusched::store
