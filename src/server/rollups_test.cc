// Issue 38: `acct` answers archived history from per-hour rollup rows in the store. RollupSet
// alone, then the control plane archiving over each store (memory, SQLite, and a real etcd
// where one is installed) with acct compared before and after.

#include "server/rollups.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "server/testing/history_fixture.h"
#include "store/record_codec.h"

namespace gpusched::server {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;

TaskUsage Usage(double gpus, int64_t mib, std::vector<std::pair<int64_t, int64_t>> runs) {
  TaskUsage u;
  u.owner = {"ann", "vision"};
  u.failure = "none";
  u.gpus = gpus;
  u.mem_mib = mib;
  u.runs = std::move(runs);
  return u;
}

TEST(RollupSetTest, Issue38_UseIsSplitByHourAndATaskCountsInTheHourItsLastRunEnded) {
  RollupSet set;
  // Day 10, 22:30 to day 11, 01:00 at a quarter GPU and 4 GiB; then 02:00 to 03:00 exactly.
  set.Add(Usage(0.25, 4096, {{10 * kDay + 22 * kHour + kHour / 2, 11 * kDay + kHour},
                             {11 * kDay + 2 * kHour, 11 * kDay + 3 * kHour}}));
  const auto rows = set.Changed();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].day, 10);
  EXPECT_EQ(rows[0].hours[22].gpu_micro_ms, 450'000'000'000);  // 0.25 x 30 min
  EXPECT_EQ(rows[0].hours[23].gpu_micro_ms, 900'000'000'000);
  EXPECT_EQ(rows[0].hours[23].gpu_mem_mib_ms, 4096 * kHour);
  EXPECT_EQ(rows[1].hours[0].gpu_micro_ms, 900'000'000'000);
  EXPECT_EQ(rows[1].hours[1], store::RollupSlot{});
  EXPECT_EQ(rows[1].hours[2].tasks, 1) << "the last run ends at 03:00: hour 2";
  int64_t tasks = 0;
  for (const auto& r : rows) {
    for (const auto& h : r.hours) tasks += h.tasks;
  }
  EXPECT_EQ(tasks, 1);
  EXPECT_EQ(set.DaysOf(Usage(1, 0, {})), std::make_pair(int64_t{0}, int64_t{-1}));
}

// A run of months touches at most kMaxRollupDays rows: the hours before the last 32 days go
// into the first kept day's hour 0, so its total stays whole and one commit holds its rows.
TEST(RollupSetTest, Issue38_ARunOfFortyDaysTouchesThirtyTwoRowsAndKeepsItsTotal) {
  RollupSet set;
  set.Load({});
  set.Add(Usage(1, 1024, {{100 * kDay, 140 * kDay}}));
  const auto rows = set.Changed();
  ASSERT_EQ(rows.size(), size_t(kMaxRollupDays));
  EXPECT_EQ(rows.front().day, 108);
  EXPECT_EQ(rows.back().day, 139);
  EXPECT_EQ(rows.front().hours[0].gpu_micro_ms, (8 * 24 + 1) * kHour * 1'000'000);
  EXPECT_EQ(rows.front().hours[1].gpu_micro_ms, kHour * 1'000'000);
  int64_t micro = 0, tasks = 0;
  for (const auto& r : rows) {
    for (const auto& h : r.hours) {
      micro += h.gpu_micro_ms;
      tasks += h.tasks;
    }
  }
  EXPECT_EQ(micro, 40 * kDay * 1'000'000);
  EXPECT_EQ(tasks, 1);
  EXPECT_EQ(rows.back().hours[23].tasks, 1);
}

// A store taking 16 operations a commit (etcd_max_txn_ops: 16) keeps 6 days a task.
TEST(RollupSetTest, Issue38_FewerDaysWhereTheStoresCommitsAreSmaller) {
  EXPECT_EQ(RollupDaysFor(128), kMaxRollupDays);
  EXPECT_EQ(RollupDaysFor(14), 6);
  EXPECT_EQ(RollupDaysFor(3), 1);
  RollupSet set(RollupDaysFor(14));
  set.Add(Usage(1, 0, {{100 * kDay, 140 * kDay}}));
  const auto rows = set.Changed();
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows.front().hours[0].gpu_micro_ms, (34 * 24 + 1) * kHour * 1'000'000);
}

TEST(RollupSetTest, Issue38_RowsLoadedAreAddedToNotReplaced) {
  RollupSet set;
  store::RollupRow stored;
  stored.day = 5;
  stored.team = "vision";
  stored.user = "ann";
  stored.failure = "none";
  stored.hours[1] = {7, 8, 9};
  store::RollupRow other = stored;
  other.user = "bob";
  set.Load({stored, other});
  set.Add(Usage(1, 2, {{5 * kDay + kHour, 5 * kDay + kHour + 10}}));
  const auto rows = set.Changed();
  ASSERT_EQ(rows.size(), 1u) << "only the rows it changed are written";
  EXPECT_EQ(rows[0].hours[1], (store::RollupSlot{7 + 10'000'000, 8 + 20, 10}));
}

using testing::HistoryTest;
using By = AccountingQuery::By;

// The control plane archiving over each store; etcd's runs only where etcd is installed.
class RollupTest : public HistoryTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    HistoryTest::SetUp();
    if (GetParam() == "etcd" && !store::LocalEtcd::Installed()) {
      GTEST_SKIP() << "etcd is not installed";
    }
  }
  // Acct by `by` over [since, until), `step` long steps, with the server's GPU sizes.
  std::vector<AccountingGroup> Over(ControlPlane& cp, By by, int64_t since, int64_t until,
                                    int64_t step, const std::string& user = "",
                                    const std::string& team = "") {
    AccountingQuery q;
    q.by = by;
    q.since_ms = since;
    q.until_ms = until;
    q.step_ms = step;
    q.user = user;
    q.team = team;
    return Acct(cp, q, cp.GpuTotalMib());
  }
  // Every grouping and filter over whole-hour windows: all of it, its middle hours, 2 h steps.
  std::vector<std::vector<AccountingGroup>> Views(ControlPlane& cp) {
    const int64_t from = start_ / kHour * kHour, to = (clock_.NowMs() / kHour + 1) * kHour;
    std::vector<std::vector<AccountingGroup>> out;
    for (By by : {By::kUser, By::kTeam, By::kTeamUser, By::kFailure}) {
      out.push_back(Over(cp, by, from, to, kHour));
      out.push_back(Over(cp, by, from + kHour, from + 3 * kHour, kHour));
      out.push_back(Over(cp, by, from, to + kHour, 2 * kHour));
    }
    out.push_back(Over(cp, By::kTeam, from, to, kHour, "ann"));
    out.push_back(Over(cp, By::kUser, from, to, kHour, "", "nlp"));
    return out;
  }
  // Windows that cut a task's runs count its use but may count the task elsewhere (in the
  // hour its last run ended): tasks are compared over whole windows only (every third view
  // but the middle one).
  static void ExpectSame(const std::vector<std::vector<AccountingGroup>>& after,
                         const std::vector<std::vector<AccountingGroup>>& before) {
    ASSERT_EQ(after.size(), before.size());
    for (size_t v = 0; v < before.size(); ++v) {
      SCOPED_TRACE("view " + std::to_string(v));
      ASSERT_EQ(after[v].size(), before[v].size());
      for (size_t i = 0; i < before[v].size(); ++i) {
        const AccountingGroup &a = after[v][i], &b = before[v][i];
        EXPECT_EQ(a.name, b.name);
        if (v % 3 != 1) {
          EXPECT_EQ(a.tasks, b.tasks) << b.name;
        }
        EXPECT_NEAR(a.gpu_hours, b.gpu_hours, 1e-6) << b.name;
        EXPECT_NEAR(a.gpu_mem_gib_hours, b.gpu_mem_gib_hours, 1e-6) << b.name;
        ASSERT_EQ(a.gpu_hours_by_step.size(), b.gpu_hours_by_step.size());
        for (size_t s = 0; s < b.gpu_hours_by_step.size(); ++s) {
          EXPECT_NEAR(a.gpu_hours_by_step[s], b.gpu_hours_by_step[s], 1e-6) << b.name << " " << s;
        }
      }
    }
  }
  // Four tasks of three users in two teams: two whole GPUs for 2.5 h, one GPU failing after
  // 42 min, a quarter GPU for 5 h and half a GPU for 40 min; then 10 minutes pass.
  std::unique_ptr<ControlPlane> RunWorkload() {
    auto cp = Start(GetParam());
    Archive(*cp);
    auto agent = Connect(*cp);
    start_ = clock_.NowMs();
    core::TaskSpec quarter = Spec("ann", "nlp", 0), half = Spec("cyd", "vision", 0);
    quarter.gpu_mem_mib = 20'480;
    half.gpu_mem_mib = 40'960;
    const std::vector<std::pair<core::TaskSpec, DurationMs>> runs = {
        {Spec("ann", "vision", 2), 5 * kHour / 2},
        {Spec("bob", "nlp"), 42 * 60'000},
        {quarter, 5 * kHour},
        {half, 40 * 60'000}};
    for (uint64_t id = 1; id <= runs.size(); ++id) {
      agent = Connect(*cp);  // heard from again after the hours the last run took
      EXPECT_TRUE(cp->Submit(runs[id - 1].first).ok());
      cp->RunOnce();
      RunFor(*cp, agent, id, runs[id - 1].second, /*exit_code=*/id == 2 ? 1 : 0);
    }
    clock_.AdvanceMs(600'000);
    return cp;
  }
  // One task of ann's, with an idempotency key (four operations to delete it on etcd), run
  // for `ms`; then 10 minutes pass.
  std::unique_ptr<ControlPlane> RunOne(DurationMs ms) {
    auto cp = Start(GetParam());
    Archive(*cp);
    auto agent = Connect(*cp);
    start_ = clock_.NowMs();
    EXPECT_TRUE(cp->Submit(Spec("ann", "vision"), "key-1").ok());
    cp->RunOnce();
    RunFor(*cp, agent, 1, ms);
    clock_.AdvanceMs(600'000);
    return cp;
  }
  void ArchiveOneInOneCommit(ControlPlane& cp) {
    const int64_t commits = store_->commits();
    auto moved = cp.ArchiveHistory();
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    EXPECT_EQ(*moved, 1u);
    EXPECT_EQ(store_->commits() - commits, 1);
  }
  int64_t RowTasks() {
    auto rows = store_->LoadRollups(0, 1'000'000);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    int64_t n = 0;
    for (const auto& r : rows.ok() ? *rows : std::vector<store::RollupRow>{}) {
      for (const auto& h : r.hours) n += h.tasks;
    }
    return n;
  }

  int64_t start_ = 0;
};

TEST_P(RollupTest, Issue38_AcctGivesTheSameAfterArchivingFromTheRollupRows) {
  auto cp = RunWorkload();
  const auto before = Views(*cp);
  ASSERT_EQ(before[0].size(), 3u) << "ann, bob, cyd";
  ASSERT_EQ(before[9].size(), 2u) << "failures: exit, none";
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_EQ(*moved, 4u);
  auto left = store_->ListTasks(std::nullopt, 0, 10);
  ASSERT_TRUE(left.ok());
  ASSERT_TRUE(left->tasks.empty()) << "the store still holds the tasks";
  EXPECT_EQ(RowTasks(), 4);
  ExpectSame(Views(*cp), before);
}

// The commit that deletes the tasks carries their rows: when it fails neither is written
// (the tasks, in the store and in the archive, count once, from the store), and the retry
// writes both once.
TEST_P(RollupTest, Issue38_AFailedArchiveCommitThenARetryCountsEachTaskOnce) {
  auto cp = RunWorkload();
  const auto before = Views(*cp);
  store_->FailNextCommits(1);
  EXPECT_FALSE(cp->ArchiveHistory().ok());
  EXPECT_TRUE(store_->GetTask(1).ok());
  EXPECT_EQ(RowTasks(), 0) << "rows written by a commit that failed";
  ExpectSame(Views(*cp), before);
  const int64_t commits = store_->commits();
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 4u);
  EXPECT_EQ(store_->commits() - commits, 1) << "the rows and the deletes in one commit";
  EXPECT_EQ(RowTasks(), 4);
  ExpectSame(Views(*cp), before);
  EXPECT_EQ(*cp->ArchiveHistory(), 0u);
  EXPECT_EQ(RowTasks(), 4);
  ExpectSame(Views(*cp), before);
}

// 200 hours of one task (with an idempotency key: four operations to delete it on etcd) are
// nine or ten day rows: one commit within etcd's 128 operations, every hour counted.
TEST_P(RollupTest, Issue38_ARunOf200HoursArchivesInOneCommitAndCountsEveryHour) {
  auto cp = RunOne(200 * kHour);
  const auto before = Views(*cp);
  ASSERT_NEAR(before[0][0].gpu_hours, 200.0, 1e-9);
  ArchiveOneInOneCommit(*cp);
  const auto after = Views(*cp);
  ExpectSame(after, before);
  ASSERT_EQ(after[0].size(), 1u) << "ann's use is not counted";
  const auto& steps = after[0][0].gpu_hours_by_step;
  ASSERT_GE(steps.size(), 201u);
  for (size_t s = 1; s < 200; ++s) EXPECT_NEAR(steps[s], 1.0, 1e-9) << "hour " << s;
  EXPECT_NEAR(after[0][0].gpu_hours, 200.0, 1e-9);
}

// Forty days of one task: 32 rows, one commit, the total kept.
TEST_P(RollupTest, Issue38_ARunOfFortyDaysArchivesInOneCommitWithItsTotal) {
  auto cp = RunOne(40 * kDay);
  ArchiveOneInOneCommit(*cp);
  auto rows = store_->LoadRollups(0, 1'000'000);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), size_t(kMaxRollupDays));
  const auto after = Over(*cp, By::kUser, 0, (clock_.NowMs() / kHour + 1) * kHour, kDay);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NEAR(after[0].gpu_hours, 40 * 24.0, 1e-6);
  EXPECT_EQ(after[0].tasks, 1);
}

// With etcd_max_txn_ops: 16 (14 operations a commit), a forty-day run keeps 6 day rows: its
// rows and its deletes (four operations with its key) still fit one Txn, its total whole.
TEST_P(RollupTest, Issue38_AFortyDayRunArchivesUnderSixteenOperationsATxn) {
  if (GetParam() != "etcd") GTEST_SKIP() << "etcd's limit";
  etcd_options_.max_txn_ops = 16;
  auto cp = RunOne(40 * kDay);
  ArchiveOneInOneCommit(*cp);
  auto rows = store_->LoadRollups(0, 1'000'000);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 6u);
  const auto after = Over(*cp, By::kUser, 0, (clock_.NowMs() / kHour + 1) * kHour, kDay);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NEAR(after[0].gpu_hours, 40 * 24.0, 1e-6);
}

// Sixty tasks of sixty users in one commit would be 120 deletes and 60 rows: etcd's commits
// are split to fit, and each task is counted once.
TEST_P(RollupTest, Issue38_ManyOwnersRowsAreSplitIntoCommitsThatFit) {
  auto cp = Start(GetParam());
  Archive(*cp);
  auto agent = Connect(*cp);
  start_ = clock_.NowMs();
  for (uint64_t id = 1; id <= 60; ++id) {
    agent = Connect(*cp);  // heard from again
    ASSERT_TRUE(cp->Submit(Spec("u" + std::to_string(id), "vision")).ok());
    cp->RunOnce();
    RunFor(*cp, agent, id, 60'000);
  }
  clock_.AdvanceMs(600'000);
  const auto before = Views(*cp);
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 60u);
  EXPECT_EQ(RowTasks(), 60);
  ExpectSame(Views(*cp), before);
}

INSTANTIATE_TEST_SUITE_P(Stores, RollupTest, ::testing::Values("memory", "sqlite", "etcd"),
                         [](const auto& param_info) { return param_info.param; });

// An archive.db written before rollups (no rolled_up column) opens, and its tasks, deleted
// from the store by that version with no rows, still count.
TEST_F(HistoryTest, Issue38_AnArchiveWithoutRolledUpOpensAndItsTasksStillCount) {
  auto cp = Start();
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 2 * 3'600'000);
  clock_.AdvanceMs(600'000);
  const auto before = Acct(*cp, AccountingQuery::By::kUser);
  ASSERT_EQ(before.size(), 1u);
  // What the previous version did: the archive's table as it was, then the delete alone.
  auto record = store_->GetTask(1);
  ASSERT_TRUE(record.ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "archive.db").string().c_str(), &db), SQLITE_OK);
  const std::string sql =
      "CREATE TABLE archived_tasks (id INTEGER PRIMARY KEY, user TEXT NOT NULL, team TEXT NOT "
      "NULL, state TEXT NOT NULL, finished_ms INTEGER NOT NULL, record TEXT NOT NULL);"
      "CREATE INDEX archived_by_finish ON archived_tasks (finished_ms);"
      "INSERT INTO archived_tasks VALUES (1, 'ann', 'vision', 'succeeded', " +
      std::to_string(record->task.finished_ms) + ", '" + store::EncodeTask(*record) + "');";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  store::WriteBatch del;
  del.deleted_tasks = {1};
  ASSERT_TRUE(store_->Commit(del).ok());
  store::SqliteArchive* archive = Archive(*cp);
  auto page = archive->ListFinishedSince(0, 0, 10, /*only_not_rolled_up=*/true);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->tasks.size(), 1u);
  const auto after = Acct(*cp, AccountingQuery::By::kUser);
  ASSERT_EQ(after.size(), 1u) << "the task archived before rollups is not counted";
  EXPECT_EQ(after[0].tasks, 1);
  EXPECT_NEAR(after[0].gpu_hours, before[0].gpu_hours, 1e-9);
  EXPECT_NEAR(after[0].gpu_hours, 2.0, 1e-9);
}

}  // namespace
}  // namespace gpusched::server
