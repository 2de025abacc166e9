#include "store/sqlite_store.h"

#include <sqlite3.h>

#include "store/record_codec.h"

namespace gpusched::store {
namespace {

constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS memory_peaks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, profile TEXT NOT NULL, peak_mib INTEGER NOT NULL);
)sql";

}  // namespace

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                         Options options) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("store: cannot open " + path + ": " + msg);
  }
  std::unique_ptr<SqliteStore> s(new SqliteStore(db));
  sqlite3_busy_timeout(db, 5000);
  GS_RETURN_IF_ERROR(s->Exec("PRAGMA journal_mode=WAL"));
  GS_RETURN_IF_ERROR(s->Exec(options.fsync_every_commit ? "PRAGMA synchronous=FULL"
                                                        : "PRAGMA synchronous=NORMAL"));
  GS_RETURN_IF_ERROR(s->Exec(kSchema));
  if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO tasks (id, record) VALUES (?, ?)", -1,
                         &s->put_task_, nullptr) != SQLITE_OK) {
    return s->Error("prepare");
  }
  return s;
}

SqliteStore::~SqliteStore() {
  sqlite3_finalize(put_task_);
  sqlite3_close(db_);
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

Status SqliteStore::PutTasks(const std::vector<TaskRecord>& records) {
  if (records.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const TaskRecord& r : records) {
    const std::string text = EncodeTask(r);
    sqlite3_reset(put_task_);
    sqlite3_bind_int64(put_task_, 1, static_cast<sqlite3_int64>(r.task.id.value()));
    sqlite3_bind_text(put_task_, 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(put_task_) != SQLITE_DONE) {
      Status s = Error("write task " + r.task.id.ToString());
      (void)Exec("ROLLBACK");
      return s;
    }
  }
  return Exec("COMMIT");
}

StatusOr<std::vector<std::string>> SqliteStore::SelectTexts(const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error("prepare");
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    out.emplace_back(text != nullptr ? text : "");
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return Error("read");
  return out;
}

StatusOr<std::vector<TaskRecord>> SqliteStore::LoadTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<std::string> rows,
                      SelectTexts("SELECT record FROM tasks ORDER BY id"));
  std::vector<TaskRecord> out;
  out.reserve(rows.size());
  for (const std::string& row : rows) {
    GS_ASSIGN_OR_RETURN(TaskRecord r, DecodeTask(row));
    out.push_back(std::move(r));
  }
  return out;
}

Status SqliteStore::PutNode(const NodeRecord& node) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO nodes (name, record) VALUES (?, ?)", -1,
                         &stmt, nullptr) != SQLITE_OK) {
    return Error("prepare");
  }
  const std::string text = EncodeNode(node);
  sqlite3_bind_text(stmt, 1, node.spec.name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? Status::Ok() : Error("write node " + node.spec.name);
}

StatusOr<std::vector<NodeRecord>> SqliteStore::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<std::string> rows,
                      SelectTexts("SELECT record FROM nodes ORDER BY name"));
  std::vector<NodeRecord> out;
  for (const std::string& row : rows) {
    GS_ASSIGN_OR_RETURN(NodeRecord r, DecodeNode(row));
    out.push_back(std::move(r));
  }
  return out;
}

Status SqliteStore::AddMemoryObservation(const MemoryObservation& o) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "INSERT INTO memory_peaks (profile, peak_mib) VALUES (?, ?)", -1,
                         &stmt, nullptr) != SQLITE_OK) {
    return Error("prepare");
  }
  const std::string text = EncodeProfile(o.profile);
  sqlite3_bind_text(stmt, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(stmt, 2, o.peak_mib);
  const int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? Status::Ok() : Error("write memory peak");
}

StatusOr<std::vector<MemoryObservation>> SqliteStore::LoadMemoryObservations() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT profile, peak_mib FROM memory_peaks ORDER BY seq", -1,
                         &stmt, nullptr) != SQLITE_OK) {
    return Error("prepare");
  }
  std::vector<MemoryObservation> out;
  Status status = Status::Ok();
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    auto profile = DecodeProfile(text != nullptr ? text : "");
    if (!profile.ok()) {
      status = profile.status();
      break;
    }
    out.push_back({*profile, sqlite3_column_int64(stmt, 1)});
  }
  sqlite3_finalize(stmt);
  GS_RETURN_IF_ERROR(status);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error("read memory peaks");
  return out;
}

}  // namespace gpusched::store
