#include "store/task_archive.h"

#include <sqlite3.h>

#include "store/record_codec.h"

namespace gpusched::store {
namespace {

constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS archived_tasks (
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, team TEXT NOT NULL, state TEXT NOT NULL,
    finished_ms INTEGER NOT NULL, record TEXT NOT NULL, rolled_up INTEGER NOT NULL DEFAULT 0);
  CREATE INDEX IF NOT EXISTS archived_by_finish ON archived_tasks (finished_ms);
)sql";

// A statement for one use, finalized at the end.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) == SQLITE_OK; }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return ok_; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  int Step() { return sqlite3_step(s_); }
  void Reset() { sqlite3_reset(s_); }
  std::string Text(int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p != nullptr ? std::string(p, sqlite3_column_bytes(s_, col)) : std::string();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  bool ok_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<SqliteArchive>> SqliteArchive::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("archive: cannot open " + path + ": " + msg);
  }
  std::unique_ptr<SqliteArchive> a(new SqliteArchive(db, path));
  std::lock_guard<std::mutex> lock(a->mu_);
  sqlite3_busy_timeout(db, 5000);
  GS_RETURN_IF_ERROR(a->Exec("PRAGMA journal_mode=WAL"));
  GS_RETURN_IF_ERROR(a->Exec("PRAGMA synchronous=FULL"));  // durable before the store deletes
  GS_RETURN_IF_ERROR(a->Exec(kSchema));
  GS_RETURN_IF_ERROR(a->Migrate());
  return a;
}

// Issue 38: a file of an earlier version has no rolled_up: its tasks count from here (0).
Status SqliteArchive::Migrate() {
  Stmt probe(db_, "SELECT rolled_up FROM archived_tasks LIMIT 0");
  if (probe.ok()) return Status::Ok();
  return Exec("ALTER TABLE archived_tasks ADD COLUMN rolled_up INTEGER NOT NULL DEFAULT 0");
}

SqliteArchive::~SqliteArchive() { sqlite3_close(db_); }

Status SqliteArchive::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return Unavailable("archive " + path_ + ": " + msg);
  }
  return Status::Ok();
}

Status SqliteArchive::Error(const std::string& what) const {
  return Unavailable("archive " + path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status SqliteArchive::Append(const std::vector<TaskRecord>& tasks) {
  if (tasks.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status s = InsertLocked(tasks);
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok() && !sqlite3_get_autocommit(db_)) (void)Exec("ROLLBACK");
  return s;
}

Status SqliteArchive::InsertLocked(const std::vector<TaskRecord>& tasks) {
  Stmt st(db_,
          "INSERT OR IGNORE INTO archived_tasks (id, user, team, state, finished_ms, record) "
          "VALUES (?, ?, ?, ?, ?, ?)");
  Stmt mark(db_, "UPDATE archived_tasks SET rolled_up = 1 WHERE id = ?");
  if (!st.ok() || !mark.ok()) return Error("prepare");
  for (const TaskRecord& r : tasks) {
    mark.Reset();
    st.Reset();
    st.Bind(1, static_cast<int64_t>(r.task.id.value()));
    st.Bind(2, r.task.spec.user);
    st.Bind(3, r.task.spec.team);
    st.Bind(4, std::string(core::TaskStateName(r.task.state)));
    st.Bind(5, static_cast<int64_t>(r.task.finished_ms));
    st.Bind(6, EncodeTask(r));
    if (st.Step() != SQLITE_DONE) return Error("archive task " + r.task.id.ToString());
    mark.Bind(1, static_cast<int64_t>(r.task.id.value()));
    if (mark.Step() != SQLITE_DONE) return Error("archive task " + r.task.id.ToString());
  }
  return Status::Ok();
}

StatusOr<TaskRecord> SqliteArchive::Get(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, "SELECT record FROM archived_tasks WHERE id = ?");
  if (!q.ok()) return Error("prepare");
  q.Bind(1, static_cast<int64_t>(id));
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return NotFound("task " + std::to_string(id) + ": no such task");
  if (rc != SQLITE_ROW) return Error("read task " + std::to_string(id));
  return DecodeTask(q.Text(0));
}

StatusOr<TaskPage> SqliteArchive::ListFinishedSince(int64_t since_ms, uint64_t after_id,
                                                    size_t limit, bool only_not_rolled_up) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, only_not_rolled_up
                  ? "SELECT record FROM archived_tasks WHERE finished_ms >= ? AND id > ? AND "
                    "rolled_up = 0 ORDER BY id LIMIT ?"
                  : "SELECT record FROM archived_tasks WHERE finished_ms >= ? AND id > ? "
                    "ORDER BY id LIMIT ?");
  if (!q.ok()) return Error("prepare");
  q.Bind(1, since_ms);
  q.Bind(2, static_cast<int64_t>(after_id));
  q.Bind(3, static_cast<int64_t>(limit) + 1);  // one more: is there a next page?
  TaskPage page;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    if (page.tasks.size() == limit) {
      page.next_after_id = page.tasks.back().task.id.value();
      break;
    }
    StatusOr<TaskRecord> r = DecodeTask(q.Text(0));
    if (!r.ok()) return r.status();
    page.tasks.push_back(std::move(r).value());
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("list archived tasks");
  return page;
}

}  // namespace gpusched::store
