#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>
#include <thread>

#include "base/cluster_id.h"
#include "base/testing/test_dir.h"
#include "store/memory_store.h"
#include "store/record_codec.h"
#include "store/testing/batches.h"
#include "store/testing/rollup_checks.h"
#include "store/testing/fault_vfs.h"

namespace gpusched::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteStore> Open(SqliteStore::Options options = {}) {
    auto s = SqliteStore::Open((dir_ / "state.db").string(), options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  gpusched::testing::TestDir dir_{"gpusched_store_test"};
};

TaskRecord RunningTask(uint64_t id) {
  TaskRecord r;
  core::Task& t = r.task;
  t.id = TaskId(id);
  t.spec.name = "t" + std::to_string(id);
  t.spec.gpus = 1;
  t.spec.gpu_mem_mib = 6144;
  t.spec.command = {"sh", "-c", "echo hi"};
  t.spec.env = {{"A", "1"}};
  t.spec.max_retries = 2;
  t.spec.time_limit_ms = 90'000;
  t.spec.heartbeat_timeout_ms = 120'000;
  t.spec.workdir = "/home/u/proj";
  t.spec.profile = core::MemoryProfile{"classify", "resnet50", 32, 224, 224};
  t.spec.tolerations.push_back({"gpu", "", true, false, core::TaintEffect::kNoSchedule});
  t.state = core::TaskState::kRunning;
  t.st = 13;
  t.pt = 4;
  t.seq = id;
  t.attempts = 2;
  t.fail_cnt = 1;
  t.exit_code = 3;
  core::Placement p;
  p.node = "n1";
  p.gpus = {2};
  p.gpu_mem_mib = {6144};
  p.resources = {1000, 2048};
  t.placement = p;
  r.last_placement = p;
  t.history.push_back({5, core::TaskState::kPending, "submitted"});
  return r;
}

TaskRecord WithState(TaskRecord r, core::TaskState state) {
  r.task.state = state;
  if (core::IsTerminal(state)) r.task.placement.reset();
  return r;
}

using testing::Tasks;

TEST_F(SqliteStoreTest, TasksSurviveReopenWithEveryField) {
  {
    auto s = Open();
    ASSERT_TRUE(s->Commit(Tasks({RunningTask(1), RunningTask(2)})).ok());
    // Replaces, does not duplicate; a finished task is no longer live.
    ASSERT_TRUE(s->Commit(Tasks({WithState(RunningTask(1), core::TaskState::kSucceeded)})).ok());
  }
  auto s = Open();
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->tasks.size(), 1u);
  EXPECT_EQ(live->max_id, 2u);
  const TaskRecord& r = live->tasks[0];
  EXPECT_EQ(EncodeTask(r), EncodeTask(RunningTask(2)));
  EXPECT_EQ(r.task.placement->gpus, std::vector<int>{2});
  EXPECT_EQ(r.task.spec.profile->model, "resnet50");
  EXPECT_EQ(r.task.spec.time_limit_ms, 90'000);
  EXPECT_EQ(r.task.spec.heartbeat_timeout_ms, 120'000);
  EXPECT_EQ(r.task.spec.workdir, "/home/u/proj");
  EXPECT_EQ(r.task.exit_code, 3);
  auto done = s->GetTask(1);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->task.state, core::TaskState::kSucceeded);
  EXPECT_EQ(s->GetTask(9).status().code(), StatusCode::kNotFound);
}

// Issue 41: how a task ended, its place in a job array and the node of each attempt (for
// `logs --attempt N`) are stored; a stored failure that is no kind is refused, naming it.
TEST_F(SqliteStoreTest, Issue41_FailureArrayAndAttemptNodesSurviveReopen) {
  TaskRecord failed = WithState(RunningTask(1), core::TaskState::kFailed);
  failed.task.failure = core::Failure::kOutOfMemory;
  failed.task.spec.array = core::ArrayMember{7, 5, 9};
  failed.task.attempt_nodes = {{1, "n1"}, {2, "n2"}, {10, "n3"}};  // 10 sorts before 2 as text
  {
    auto s = Open();
    ASSERT_TRUE(s->Commit(Tasks({failed})).ok());
  }
  auto s = Open();
  auto back = s->GetTask(1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->task.failure, core::Failure::kOutOfMemory);
  EXPECT_EQ(back->task.spec.array, (core::ArrayMember{7, 5, 9}));
  EXPECT_EQ(back->task.attempt_nodes, failed.task.attempt_nodes);
  EXPECT_EQ(EncodeTask(*back), EncodeTask(failed));

  std::string text = EncodeTask(failed);
  const std::string kind = "\"failure\":\"out_of_memory\"";
  ASSERT_NE(text.find(kind), std::string::npos) << text;
  text.replace(text.find(kind), kind.size(), "\"failure\":\"gremlins\"");
  StatusOr<TaskRecord> bad = DecodeTask(text);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("failure: \"gremlins\""), std::string::npos)
      << bad.status().message();
}

TEST_F(SqliteStoreTest, ListsPagesByStateFromTheIndexAndCountsByState) {
  auto s = Open();
  std::vector<TaskRecord> all;
  for (uint64_t id = 1; id <= 25; ++id) {
    all.push_back(WithState(RunningTask(id), id % 5 == 0 ? core::TaskState::kFailed
                                                          : core::TaskState::kSucceeded));
  }
  ASSERT_TRUE(s->Commit(Tasks(all)).ok());
  std::vector<uint64_t> seen;
  for (uint64_t after = 0;;) {
    auto page = s->ListTasks("succeeded", after, 7);
    ASSERT_TRUE(page.ok());
    ASSERT_LE(page->tasks.size(), 7u);
    for (const TaskRecord& r : page->tasks) seen.push_back(r.task.id.value());
    if (page->next_after_id == 0) break;
    after = page->next_after_id;
  }
  ASSERT_EQ(seen.size(), 20u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::count_if(seen.begin(), seen.end(), [](uint64_t id) { return id % 5 == 0; }), 0);
  auto counts = s->CountTasksByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)["succeeded"], 20);
  EXPECT_EQ((*counts)["failed"], 5);
  auto everything = s->ListTasks(std::nullopt, 20, 100);
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->tasks.size(), 5u);
  EXPECT_EQ(everything->next_after_id, 0u);
}

// Issue 38: archived tasks are deleted with WriteBatch::deleted_tasks; every read forgets
// them, and the largest id ever stored survives (a restart never hands it out again).
TEST_F(SqliteStoreTest, Issue38_DeletedTasksLeaveEveryReadAndTheirIdsAreNotReused) {
  {
    auto s = Open();
    WriteBatch b;
    b.tasks = {RunningTask(1), WithState(RunningTask(2), core::TaskState::kSucceeded),
               WithState(RunningTask(3), core::TaskState::kFailed)};
    b.idempotency_keys = {{"key-1", 1}, {"key-2", 2}};
    ASSERT_TRUE(s->Commit(b).ok());
    WriteBatch del;
    del.deleted_tasks = {2, 3, 99};  // 99 was never stored: a no-op
    ASSERT_TRUE(s->Commit(del).ok());
  }
  auto s = Open();
  EXPECT_EQ(s->GetTask(3).status().code(), StatusCode::kNotFound);
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ(live->max_id, 3u);
  ASSERT_EQ(live->tasks.size(), 1u);
  auto counts = s->CountTasksByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::map<std::string, int64_t>{{"running", 1}}));
  auto page = s->ListTasks(std::nullopt, 0, 10);
  ASSERT_EQ(page->tasks.size(), 1u);
  EXPECT_FALSE(s->LookupIdempotencyKey("key-2")->has_value());  // went with its task
  EXPECT_EQ(*s->LookupIdempotencyKey("key-1").value(), 1u);
}

TEST_F(SqliteStoreTest, IdempotencyKeyKeepsTheFirstTask) {
  {
    auto s = Open();
    WriteBatch b;
    b.idempotency_keys["k1"] = 4;
    ASSERT_TRUE(s->Commit(b).ok());
    b.idempotency_keys["k1"] = 9;  // a second writer of the same key does not replace it
    ASSERT_TRUE(s->Commit(b).ok());
  }
  auto s = Open();
  EXPECT_EQ(*s->LookupIdempotencyKey("k1"), std::optional<uint64_t>(4));
  EXPECT_EQ(*s->LookupIdempotencyKey("k2"), std::nullopt);
}

// EncodeTask writes JSON by hand; its text must be exactly nlohmann's canonical dump of the
// same document (sorted keys, same escapes), so rows read the same whichever wrote them.
TEST(RecordCodecTest, TaskTextIsCanonicalJson) {
  TaskRecord r = RunningTask(7);
  r.task.spec.name = "quote\" back\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9 del\x7f";
  r.task.spec.command = {"sh", "-c", "printf '%s\\n' \"$X\""};
  r.task.spec.env = {{"B", "2"}, {"A", ""}, {"Z\"", "\\"}};
  r.task.spec.node_selector = {{"zone", "a"}};
  r.task.spec.duration_ms = 1000;
  r.task.mem_source = "explicit";
  r.task.reason = "assigned to n1";
  r.task.last_report_summary = "placed on n1 (score 81.2: LeastAllocated 75.0)";
  r.task.history.push_back({-3, core::TaskState::kRunning, ""});
  for (const TaskRecord& rec : {r, RunningTask(1), TaskRecord{}}) {
    const std::string text = EncodeTask(rec);
    EXPECT_EQ(nlohmann::json::parse(text).dump(), text);
    auto back = DecodeTask(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(EncodeTask(*back), text);
  }
  EXPECT_EQ(DecodeTask(EncodeTask(r))->task.spec.name, r.task.spec.name);
}

TEST(RecordCodecTest, Issue38_RollupRowsRoundTripAndTheDecoderNamesWhatIsWrong) {
  RollupRow row = testing::Rollup(20'428, "vision", "ann", "none", 23, 3'600'000'000'000);
  row.hours[0] = {1, 2, 3};
  auto back = DecodeRollup(EncodeRollup(row));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, row);
  const std::string zeros = "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]";
  auto text = [&](const std::string& day, const std::string& team, const std::string& micro,
                  const std::string& tasks, const std::string& extra = "") {
    return "{\"day\":" + day + ",\"failure\":\"none\",\"gpu_mem_mib_ms\":" + zeros +
           ",\"gpu_micro_ms\":" + micro + ",\"tasks\":" + tasks + ",\"team\":" + team +
           ",\"user\":\"ann\",\"v\":1" + extra + "}";
  };
  ASSERT_TRUE(DecodeRollup(text("1", "\"t\"", zeros, zeros)).ok());
  const std::string short_slots = "[0,0,0]";
  const std::string negative = "[0,0,0,-5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]";
  const std::string fraction = "[0.5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {text("-1", "\"t\"", zeros, zeros), "day: -1"},
      {text("\"1\"", "\"t\"", zeros, zeros), "day: \"1\""},
      {text("1", "\"\"", zeros, zeros), "team: \"\""},
      {text("1", "7", zeros, zeros), "team: 7"},
      {text("1", "\"t\"", short_slots, zeros), "gpu_micro_ms: not an array of 24"},
      {text("1", "\"t\"", negative, zeros), "gpu_micro_ms[3]: -5"},
      {text("1", "\"t\"", zeros, fraction), "tasks[0]: 0.5"},
      {text("1", "\"t\"", zeros, "[18446744073709551615" + zeros.substr(2)),
       "tasks[0]: 18446744073709551615"},
      {text("1", "\"t\"", zeros, zeros, ",\"gpus\":1"), "gpus: unknown field"},
      {"{\"day\":1}", "failure: missing"},
      {std::regex_replace(text("1", "\"t\"", zeros, zeros), std::regex("\"v\":1"), "\"v\":2"),
       "v: 2"},
      {"[1,2]", "rollup: not an object"},
      {"{\"day\":", "rollup: corrupt stored record"},
  };
  for (const auto& [json, want] : bad) {
    auto r = DecodeRollup(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << json;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << json << "\n  said: " << r.status().message() << "\n  want: " << want;
  }
}

TEST_F(SqliteStoreTest, Issue38_RollupRowsAreWrittenWholeAndReadByDayInOrder) {
  testing::ExpectRollupsReadBack(*Open());
  auto reopened = Open();  // they survive a reopen
  auto rows = reopened->LoadRollups(20'000, 20'001);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 4u);
}

TEST(MemoryStoreTest, Issue38_RollupRowsAreWrittenWholeAndReadByDayInOrder) {
  MemoryStore store;
  testing::ExpectRollupsReadBack(store);
}

TEST_F(SqliteStoreTest, NodesAndLearnedPeaksSurviveReopenOneRowPerProfile) {
  const core::MemoryProfile profile{"classify", "resnet50", 32, 224, 224};
  {
    SqliteStore::Options unsynced;  // what is counted is rows, not syncs: 1,000 fsyncs spared
    unsynced.fsync_every_commit = false;
    auto s = Open(unsynced);
    WriteBatch b;
    NodeRecord n;
    n.spec.name = "n1";
    n.spec.address = "127.0.0.1:1";
    n.spec.gpus = {{"A100", 81920}};
    n.cordoned = true;
    b.nodes.push_back(n);
    for (int64_t i = 1; i <= 1000; ++i) {  // a thousand tasks of one profile: one row
      b.peaks = {{profile, {4000 + i, 3000}, i}};
      ASSERT_TRUE(s->Commit(b).ok());
    }
  }
  auto s = Open();
  auto nodes = s->LoadNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_TRUE((*nodes)[0].cordoned);
  EXPECT_EQ((*nodes)[0].spec.gpus[0].total_mib, 81920);
  auto peaks = s->LoadLearnedPeaks();
  ASSERT_TRUE(peaks.ok());
  ASSERT_EQ(peaks->size(), 1u);
  EXPECT_EQ((*peaks)[0].recent_mib, (std::vector<MiB>{5000, 3000}));
  EXPECT_EQ((*peaks)[0].observations, 1000);
  EXPECT_EQ((*peaks)[0].profile.batch, 32);
}

TEST_F(SqliteStoreTest, QuotasSurviveReopenOneRowPerTeam) {
  {
    auto s = Open();
    WriteBatch b;
    b.quotas = {{"b", 2, 0, core::kUnlimitedBorrow, ""}, {"a", 4, 81920, 2, ""}};
    ASSERT_TRUE(s->Commit(b).ok());
    b.quotas = {{"a", 8, 0, 0, ""}};  // replaces a's
    ASSERT_TRUE(s->Commit(b).ok());
  }
  auto quotas = Open()->LoadQuotas();
  ASSERT_TRUE(quotas.ok()) << quotas.status().ToString();
  ASSERT_EQ(quotas->size(), 2u);
  EXPECT_EQ((*quotas)[0], (core::TeamQuota{"a", 8, 0, 0, ""}));
  EXPECT_EQ((*quotas)[1], (core::TeamQuota{"b", 2, 0, core::kUnlimitedBorrow, ""}));
}

// Issue 36: a team's granted priority class is stored with its quota; a forgotten profile
// (`profile rm`) is deleted; a database of the previous version gains the grant column and
// drops its learned peaks (the largest ever reported, by tasks that could write them).
TEST_F(SqliteStoreTest, Issue36_GrantsAndForgottenPeaksAndThePreviousSchema) {
  const core::MemoryProfile profile{"", "resnet50", 1, 0, 0};
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "state.db").c_str(), &db), SQLITE_OK);
    const std::string sql =
        "CREATE TABLE learned_peaks (profile TEXT PRIMARY KEY, max_peak_mib INTEGER NOT NULL, "
        "observations INTEGER NOT NULL);"
        "CREATE TABLE quotas (team TEXT PRIMARY KEY, guaranteed_gpus INTEGER NOT NULL, "
        "guaranteed_gpu_mem_mib INTEGER NOT NULL, borrow_gpus INTEGER NOT NULL);"
        "INSERT INTO learned_peaks VALUES ('" + EncodeProfile(profile) + "', 16000, 1);"
        "INSERT INTO quotas VALUES ('a', 2, 0, 1);";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto s = Open();
    auto peaks = s->LoadLearnedPeaks();
    ASSERT_TRUE(peaks.ok()) << peaks.status().ToString();
    EXPECT_TRUE(peaks->empty());
    auto quotas = s->LoadQuotas();
    ASSERT_TRUE(quotas.ok()) << quotas.status().ToString();
    ASSERT_EQ(quotas->size(), 1u);
    EXPECT_EQ((*quotas)[0], (core::TeamQuota{"a", 2, 0, 1, ""}));
    WriteBatch b;
    b.quotas = {{"nlp", 0, 0, core::kUnlimitedBorrow, "high"}};
    b.peaks = {{profile, {5000, 5200}, 2}};
    ASSERT_TRUE(s->Commit(b).ok());
  }
  {
    auto s = Open();
    EXPECT_EQ((*s->LoadQuotas())[1],
              (core::TeamQuota{"nlp", 0, 0, core::kUnlimitedBorrow, "high"}));
    ASSERT_EQ(s->LoadLearnedPeaks()->size(), 1u);
    WriteBatch forget;
    forget.forgotten_peaks = {profile};
    ASSERT_TRUE(s->Commit(forget).ok());
  }
  EXPECT_TRUE(Open()->LoadLearnedPeaks()->empty());
}

// Rows that do not decode are moved to the quarantine table; the rest loads and the server
// starts. Before the quarantine, one corrupt row made LoadTasks fail and the server refuse
// to start.
TEST_F(SqliteStoreTest, CorruptRowIsQuarantinedAndTheRestLoads) {
  ASSERT_TRUE(Open()->Commit(Tasks({RunningTask(1), RunningTask(2), RunningTask(3)})).ok());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "state.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE tasks SET record = '{\"v\":1,\"id\":' WHERE id = 2",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE nodes SET record = 'x'", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = Open();
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->tasks.size(), 2u);
  EXPECT_EQ(live->tasks[0].task.id.value(), 1u);
  EXPECT_EQ(live->tasks[1].task.id.value(), 3u);
  EXPECT_EQ(live->max_id, 3u);
  ASSERT_EQ(live->quarantined.size(), 1u);
  EXPECT_EQ(live->quarantined[0].key, "2");
  EXPECT_NE(live->quarantined[0].error.find("corrupt"), std::string::npos);
  auto again = s->LoadLiveTasks();  // moved aside once, not reported at every start
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->quarantined.empty());
  auto q = s->LoadQuarantine();
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].table, "tasks");
}

TEST_F(SqliteStoreTest, CorruptRowIsDataLossNotACrash) {
  EXPECT_EQ(DecodeTask("{not json").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeTask("{\"v\":1}").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeNode("[]").status().code(), StatusCode::kDataLoss);
}

// A database of the first version (no state column, one row per memory observation) opens
// and keeps every task; its observations (unverified task reports) are dropped (issue 36).
TEST_F(SqliteStoreTest, FirstVersionDatabaseIsUpgraded) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "state.db").c_str(), &db), SQLITE_OK);
    const std::string row = EncodeTask(RunningTask(1));
    const std::string profile = EncodeProfile({"classify", "resnet50", 32, 224, 224});
    const std::string sql =
        "CREATE TABLE tasks (id INTEGER PRIMARY KEY, record TEXT NOT NULL);"
        "CREATE TABLE memory_peaks (seq INTEGER PRIMARY KEY AUTOINCREMENT, profile TEXT NOT "
        "NULL, peak_mib INTEGER NOT NULL);"
        "INSERT INTO tasks VALUES (1, '" + row + "');"
        "INSERT INTO memory_peaks (profile, peak_mib) VALUES ('" + profile + "', 3000), ('" +
        profile + "', 5000);";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = Open();
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->tasks.size(), 1u);
  auto peaks = s->LoadLearnedPeaks();
  ASSERT_TRUE(peaks.ok());
  EXPECT_TRUE(peaks->empty());
}

// Issue 39: the schema version (PRAGMA user_version). A store of the version before schema
// versions (0: today's tables, no version) opens with its tasks and is marked with this
// version's; a store a newer server wrote (a higher version) is refused and left untouched.
int UserVersion(const std::filesystem::path& db_path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr);
  const int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return version;
}

void SetUserVersion(const std::filesystem::path& db_path, int version) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  const std::string sql = "PRAGMA user_version=" + std::to_string(version);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, Issue39_AStoreWithoutSchemaVersionOpensAndIsMarked) {
  ASSERT_TRUE(Open()->Commit(Tasks({RunningTask(1)})).ok());
  EXPECT_EQ(UserVersion(dir_ / "state.db"), SqliteStore::SchemaVersion());
  SetUserVersion(dir_ / "state.db", 0);
  {
    auto s = Open();
    auto live = s->LoadLiveTasks();
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    ASSERT_EQ(live->tasks.size(), 1u);
  }
  EXPECT_EQ(UserVersion(dir_ / "state.db"), SqliteStore::SchemaVersion());
}

void ExecSql(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

// Issue 39: the id is made with the file and kept by every reopen (and by a store of the
// version before cluster ids, which gets one at its first open); a new file is a new cluster.
TEST_F(SqliteStoreTest, Issue39_ClusterIdIsMadeOnceKeptAcrossReopensAndNewForANewStore) {
  std::string id;
  {
    auto s = Open();
    id = s->ClusterId();
    ASSERT_TRUE(s->Commit(Tasks({RunningTask(1)})).ok());
  }
  EXPECT_TRUE(ValidateClusterId(id, "id").ok()) << id;
  EXPECT_EQ(Open()->ClusterId(), id);
  EXPECT_EQ(UserVersion(dir_ / "state.db"), 1);  // the table came without a schema change
  auto other = SqliteStore::Open((dir_ / "other.db").string(), {});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_NE((*other)->ClusterId(), id);
  other->reset();
  // A file of the version before: no meta table. It gets an id at its first open, and keeps it.
  ExecSql(dir_ / "other.db", "DROP TABLE meta");
  std::string upgraded;
  {
    auto s = SqliteStore::Open((dir_ / "other.db").string(), {});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    upgraded = (*s)->ClusterId();
  }
  EXPECT_TRUE(ValidateClusterId(upgraded, "id").ok()) << upgraded;
  auto again = SqliteStore::Open((dir_ / "other.db").string(), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->ClusterId(), upgraded);
}

TEST_F(SqliteStoreTest, Issue39_AStoredClusterIdThatIsNotAnIdIsRefusedNamingIt) {
  Open();
  ExecSql(dir_ / "state.db", "UPDATE meta SET value = 'x/../y' WHERE key = 'cluster_id'");
  auto s = SqliteStore::Open((dir_ / "state.db").string(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("meta.cluster_id: \"x/../y\""), std::string::npos)
      << s.status().ToString();
}

TEST_F(SqliteStoreTest, Issue39_AStoreOfANewerSchemaIsRefusedAndLeftAlone) {
  ASSERT_TRUE(Open()->Commit(Tasks({RunningTask(1)})).ok());
  const int newer = SqliteStore::SchemaVersion() + 1;
  SetUserVersion(dir_ / "state.db", newer);
  auto s = SqliteStore::Open((dir_ / "state.db").string(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("schema version " + std::to_string(newer) +
                                      " is newer than this server's " +
                                      std::to_string(SqliteStore::SchemaVersion())),
            std::string::npos)
      << s.status().ToString();
  EXPECT_EQ(UserVersion(dir_ / "state.db"), newer);
}

// Every write of a commit fails in turn (the Nth write, for every N until one commit needs
// no more): the failed batch leaves nothing behind, the next commit succeeds, and the store
// reopens with exactly the batches that returned OK. Before the fix, a failed COMMIT left its
// transaction open: every later BEGIN failed.
TEST_F(SqliteStoreTest, FailedWriteOrCommitRollsBackAndTheNextCommitWorks) {
  testing::FaultVfs::Register();
  SqliteStore::Options options;
  options.vfs = testing::FaultVfs::kName;
  uint64_t next_id = 1;
  std::vector<uint64_t> stored;
  for (int64_t n = 0;; ++n) {
    auto s = SqliteStore::Open((dir_ / "state.db").string(), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const uint64_t failed_id = next_id++;
    testing::FaultVfs::FailWritesAfter(n);
    Status st = (*s)->Commit(Tasks({RunningTask(failed_id)}));
    const bool injected = testing::FaultVfs::failed_writes() > 0;
    testing::FaultVfs::Heal();
    if (st.ok()) {
      ASSERT_FALSE(injected);
      stored.push_back(failed_id);
      break;  // the commit needed fewer than n + 1 writes: every position was tried
    }
    ASSERT_TRUE(injected) << "failed without an injected fault: " << st.ToString();
    EXPECT_EQ((*s)->GetTask(failed_id).status().code(), StatusCode::kNotFound) << "n=" << n;
    const uint64_t ok_id = next_id++;
    ASSERT_TRUE((*s)->Commit(Tasks({RunningTask(ok_id)})).ok()) << "n=" << n;
    stored.push_back(ok_id);
    ASSERT_LT(n, 100) << "a commit should need far fewer writes";
  }
  auto s = Open();
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok());
  std::vector<uint64_t> ids;
  for (const TaskRecord& r : live->tasks) ids.push_back(r.task.id.value());
  EXPECT_EQ(ids, stored);
}

// Durable by default (issue 39): every commit syncs the WAL before it returns (FULL), so an
// acknowledged task survives power loss; NORMAL leaves the sync to the next checkpoint.
TEST_F(SqliteStoreTest, Issue39_EveryCommitSyncsByDefaultAndNormalDoesNot) {
  testing::FaultVfs::Register();
  for (const bool full : {true, false}) {
    SqliteStore::Options options;
    options.vfs = testing::FaultVfs::kName;
    if (!full) options.fsync_every_commit = false;
    auto s = SqliteStore::Open((dir_ / (full ? "full.db" : "normal.db")).string(), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (uint64_t id = 1; id <= 3; ++id) {
      const int64_t before = testing::FaultVfs::syncs();
      ASSERT_TRUE((*s)->Commit(Tasks({RunningTask(id)})).ok());
      const int64_t synced = testing::FaultVfs::syncs() - before;
      if (full) {
        EXPECT_GE(synced, 1) << "commit " << id << " returned before a sync";
      } else {
        EXPECT_EQ(synced, 0) << "commit " << id;
      }
    }
  }
}

// A sync that fails (a full or failing disk) fails the commit: the batch is not acknowledged
// and is not there; once the disk heals the next commit is stored.
TEST_F(SqliteStoreTest, Issue39_AFailedSyncFailsTheCommitAndLeavesNothing) {
  testing::FaultVfs::Register();
  SqliteStore::Options options;
  options.vfs = testing::FaultVfs::kName;
  {
    auto s = SqliteStore::Open((dir_ / "state.db").string(), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    testing::FaultVfs::FailSyncs();
    EXPECT_FALSE((*s)->Commit(Tasks({RunningTask(1)})).ok());
    testing::FaultVfs::Heal();
    EXPECT_EQ((*s)->GetTask(1).status().code(), StatusCode::kNotFound);
    ASSERT_TRUE((*s)->Commit(Tasks({RunningTask(2)})).ok());
  }
  auto s = Open();
  auto live = s->LoadLiveTasks();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->tasks.size(), 1u);
  EXPECT_EQ(live->tasks[0].task.id.value(), 2u);
}

// `admin backup` (issue 39): a snapshot taken while another thread commits holds whole
// commits only (each commit is two tasks: both or neither), a prefix of them, readable as a
// store; a snapshot never overwrites a file, and one that cannot be written leaves nothing.
TEST_F(SqliteStoreTest, Issue39_SnapshotUnderCommitsHoldsWholeCommitsOnly) {
  SqliteStore::Options unsynced;
  unsynced.fsync_every_commit = false;
  auto s = Open(unsynced);
  ASSERT_TRUE(s->Commit(Tasks({RunningTask(1), RunningTask(2)})).ok());
  std::atomic<bool> stop{false};
  std::thread committer([&] {
    for (uint64_t id = 3; !stop.load() && id < 20'000; id += 2) {
      ASSERT_TRUE(s->Commit(Tasks({RunningTask(id), RunningTask(id + 1)})).ok());
    }
  });
  const std::string snap = (dir_ / "snap.db").string();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Status taken = s->SnapshotTo(snap);
  stop = true;
  committer.join();
  ASSERT_TRUE(taken.ok()) << taken.ToString();
  EXPECT_EQ(s->SnapshotTo(snap).code(), StatusCode::kFailedPrecondition);  // never overwritten
  auto copy = SqliteStore::Open(snap, {});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto live = (*copy)->LoadLiveTasks();
  ASSERT_TRUE(live.ok());
  std::vector<uint64_t> ids;
  for (const TaskRecord& r : live->tasks) ids.push_back(r.task.id.value());
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.size() % 2, 0u) << "a commit is half in the snapshot";
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], i + 1) << "not a prefix";

  const std::string nowhere = (dir_ / "missing" / "snap.db").string();
  EXPECT_FALSE(s->SnapshotTo(nowhere).ok());
  EXPECT_FALSE(std::filesystem::exists(nowhere));
}

TEST_F(SqliteStoreTest, UnwritablePathNamesThePath) {
  auto s = SqliteStore::Open((dir_ / "missing" / "x.db").string(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing"), std::string::npos);
}

// A second process on the same database (a second server on one data dir) is refused at
// Open, naming the file, and the first keeps writing. The child is forked before the first
// store opens: a child forked after would inherit SQLite's table of this process's locks and
// be refused by it, without asking the kernel, so the file lock itself would go untested.
TEST_F(SqliteStoreTest, SecondProcessOnTheSameDatabaseIsRefused) {
  const std::string path = (dir_ / "state.db").string();
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);
    char c = 0;
    if (read(go[0], &c, 1) != 1) _exit(2);  // the parent failed before holding the lock
    SqliteStore::Options o;
    o.lock_wait_ms = 0;
    auto second = SqliteStore::Open(path, o);
    const bool refused = !second.ok() &&
                         second.status().code() == StatusCode::kFailedPrecondition &&
                         second.status().message().find(path) != std::string::npos &&
                         second.status().message().find("in use") != std::string::npos;
    _exit(refused ? 0 : 1);
  }
  close(go[0]);
  std::unique_ptr<SqliteStore> first;
  {
    auto opened = SqliteStore::Open(path, {});
    if (opened.ok()) {
      first = std::move(opened).value();
      EXPECT_TRUE(first->Commit(Tasks({RunningTask(1)})).ok());
      EXPECT_EQ(write(go[1], "x", 1), 1);  // the lock is held: the child may try
    }
    close(go[1]);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(first);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the second Open was not refused";
  EXPECT_TRUE(first->Commit(Tasks({RunningTask(2)})).ok());
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));  // the WAL index is in memory
  first.reset();
  auto reopened = Open();  // released with the first
  auto live = reopened->LoadLiveTasks();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->tasks.size(), 2u);
}

TEST_F(SqliteStoreTest, TokensSurviveReopenAndARevokedOneIsGone) {
  {
    auto s = Open();
    WriteBatch b;
    b.tokens = {{"00000000000000aa", "alice", "ml", false, 17, std::string(64, 'c')},
                {"00000000000000bb", "ops", "default", true, 18, std::string(64, 'd')}};
    ASSERT_TRUE(s->Commit(b).ok());
    WriteBatch revoke;
    revoke.revoked_tokens = {"00000000000000bb", "not-there"};  // an absent id is a no-op
    ASSERT_TRUE(s->Commit(revoke).ok());
  }
  auto s = Open();
  auto tokens = s->LoadTokens();
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_EQ(tokens->size(), 1u);
  const TokenRecord& t = (*tokens)[0];
  EXPECT_EQ(t.id, "00000000000000aa");
  EXPECT_EQ(t.user, "alice");
  EXPECT_EQ(t.team, "ml");
  EXPECT_FALSE(t.admin);
  EXPECT_EQ(t.created_ms, 17);
  EXPECT_EQ(t.secret_sha256, std::string(64, 'c'));
}

}  // namespace
}  // namespace gpusched::store
