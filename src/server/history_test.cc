// Issue 38, bounded history: finished tasks older than history_retention move from the store
// to the archive (archive first, then one commit deleting them), `show` and `acct` still find
// them, and a failed archive write deletes nothing. ControlPlane on the fake clock against
// SQLite and the SQLite archive; the loop thread is not started.

#include <gtest/gtest.h>

#include "server/testing/history_fixture.h"
#include "store/etcd_store.h"
#include "store/local_etcd.h"
#include "store/sqlite_store.h"
#include "store/task_archive.h"
#include "store/testing/faulty_store.h"

namespace gpusched::server {
namespace {

using testing::HistoryTest;

// An archive whose writes fail (a full disk, a read-only file), for the fault tests.
class FailingArchive final : public store::TaskArchive {
 public:
  Status Append(const std::vector<store::TaskRecord>&) override {
    ++appends;
    return Unavailable("archive: disk full");
  }
  StatusOr<store::TaskRecord> Get(uint64_t id) override {
    return NotFound("task " + std::to_string(id) + ": no such task");
  }
  StatusOr<store::TaskPage> ListFinishedSince(int64_t, uint64_t, size_t, bool) override {
    return store::TaskPage{};
  }
  int appends = 0;
};

TEST_F(HistoryTest, Issue38_FinishedTasksPastTheRetentionMoveToTheArchiveAndShowFindsThem) {
  auto cp = Start();
  store::SqliteArchive* archive = Archive(*cp);
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision")).ok());
  ASSERT_TRUE(cp->Submit(Spec("bob", "nlp")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 5'000);  // task 1 ends; task 2 keeps running
  cp->AgentMessage("n1", Report(2, TaskReport::Kind::kStarted), agent);
  cp->RunOnce();
  // Not yet past the retention: nothing moves.
  clock_.AdvanceMs(30'000);
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 0u);
  clock_.AdvanceMs(31'000);
  moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1u);
  EXPECT_EQ(store_->GetTask(1).status().code(), StatusCode::kNotFound) << "still in the store";
  auto archived = archive->Get(1);
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  EXPECT_EQ(archived->task.state, core::TaskState::kSucceeded);
  auto shown = cp->GetTask(1);  // `gpusched show 1`
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->task.spec.user, "ann");
  EXPECT_EQ(shown->task.state, core::TaskState::kSucceeded);
  // The running task stays in the store, and out of the archive.
  EXPECT_TRUE(store_->GetTask(2).ok());
  EXPECT_EQ(archive->Get(2).status().code(), StatusCode::kNotFound);
  // /metrics counts what the store holds, as a restart would.
  EXPECT_NE(cp->MetricsText().find("gpusched_tasks{state=\"succeeded\"} 0\n"), std::string::npos)
      << cp->MetricsText();
  // Archiving again is a no-op; a restart hands out ids past the archived ones.
  EXPECT_EQ(*cp->ArchiveHistory(), 0u);
  auto live = store_->LoadLiveTasks();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->max_id, 2u);
}

TEST_F(HistoryTest, Issue38_AFailedArchiveWriteDeletesNothing) {
  auto cp = Start();
  auto failing = std::make_unique<FailingArchive>();
  FailingArchive* archive = failing.get();
  cp->SetArchive(std::move(failing));
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 1'000);
  clock_.AdvanceMs(120'000);
  auto moved = cp->ArchiveHistory();
  EXPECT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("disk full"), std::string::npos)
      << moved.status().ToString();
  EXPECT_EQ(archive->appends, 1);
  auto kept = store_->GetTask(1);
  ASSERT_TRUE(kept.ok()) << "deleted although the archive did not take it";
  EXPECT_EQ(kept->task.state, core::TaskState::kSucceeded);
}

TEST_F(HistoryTest, Issue38_AFailedDeleteLeavesTheTaskInBothAndTheNextRoundFinishesIt) {
  auto cp = Start();
  store::SqliteArchive* archive = Archive(*cp);
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 1'000);
  clock_.AdvanceMs(120'000);
  store_->FailNextCommits(1);
  EXPECT_FALSE(cp->ArchiveHistory().ok());
  EXPECT_TRUE(store_->GetTask(1).ok());
  EXPECT_TRUE(archive->Get(1).ok());
  EXPECT_EQ(Acct(*cp, AccountingQuery::By::kUser)[0].tasks, 1) << "counted twice";
  auto moved = cp->ArchiveHistory();  // archives it again (a no-op there), then deletes
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1u);
  EXPECT_EQ(store_->GetTask(1).status().code(), StatusCode::kNotFound);
}

TEST_F(HistoryTest, Issue38_TasksStillInMemoryStayInTheStore) {
  config_.retain_finished = 10'000;
  config_.retain_finished_ms = 3'600'000;
  auto cp = Start();
  Archive(*cp);
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 1'000);
  clock_.AdvanceMs(120'000);  // past history_retention, inside retain_finished_for
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 0u);
  EXPECT_TRUE(store_->GetTask(1).ok());
}

void ExpectSameGroups(const std::vector<AccountingGroup>& a,
                      const std::vector<AccountingGroup>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].tasks, b[i].tasks) << a[i].name;
    EXPECT_NEAR(a[i].gpu_hours, b[i].gpu_hours, 1e-9) << a[i].name;
    EXPECT_NEAR(a[i].gpu_mem_gib_hours, b[i].gpu_mem_gib_hours, 1e-9) << a[i].name;
    ASSERT_EQ(a[i].gpu_hours_by_step.size(), b[i].gpu_hours_by_step.size());
    for (size_t s = 0; s < a[i].gpu_hours_by_step.size(); ++s) {
      EXPECT_NEAR(a[i].gpu_hours_by_step[s], b[i].gpu_hours_by_step[s], 1e-9) << a[i].name;
    }
  }
}

TEST_F(HistoryTest, Issue38_AcctAfterArchivingEqualsAcctBefore) {
  auto cp = Start();
  Archive(*cp);
  auto agent = Connect(*cp);
  ASSERT_TRUE(cp->Submit(Spec("ann", "vision", 2)).ok());
  ASSERT_TRUE(cp->Submit(Spec("bob", "nlp")).ok());
  ASSERT_TRUE(cp->Submit(Spec("ann", "nlp")).ok());
  cp->RunOnce();
  RunFor(*cp, agent, 1, 2 * 3'600'000);
  RunFor(*cp, agent, 2, 1'800'000);
  cp->AgentMessage("n1", Report(3, TaskReport::Kind::kStarted), agent);  // still runs
  cp->RunOnce();
  clock_.AdvanceMs(600'000);
  using By = AccountingQuery::By;
  const auto by_user = Acct(*cp, By::kUser), by_team = Acct(*cp, By::kTeam),
             by_pair = Acct(*cp, By::kTeamUser);
  ASSERT_EQ(by_user.size(), 2u);
  auto moved = cp->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_EQ(*moved, 2u);
  ASSERT_EQ(store_->GetTask(1).status().code(), StatusCode::kNotFound);
  ExpectSameGroups(Acct(*cp, By::kUser), by_user);
  ExpectSameGroups(Acct(*cp, By::kTeam), by_team);
  ExpectSameGroups(Acct(*cp, By::kTeamUser), by_pair);
}

// With etcd (a real one, started here): the deletion is an ordinary fenced commit of the
// leader's store, and leaves nothing of the task in etcd: record, state index entry,
// idempotency key. A new leader's take-over does not see it; `show` finds it in the archive.
TEST_F(HistoryTest, Issue38_WithEtcdAnArchivedTaskLeavesNothingInEtcd) {
  if (!store::LocalEtcd::Installed()) GTEST_SKIP() << "etcd is not installed";
  store::LocalEtcd::Options eo;
  eo.dir = (dir_ / "etcd").string();
  eo.members = 1;
  auto etcd = store::LocalEtcd::Start(eo);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto client = [&] { return std::move(store::EtcdClient::Create((*etcd)->client_url_list())).value(); };
  auto leader_key = client()->Txn({}, {store::EtcdOp::Put("/gpusched/leader", "me")});
  ASSERT_TRUE(leader_key.ok());
  store::EtcdStore::Options so;
  so.fence = {"/gpusched/leader", leader_key->revision};
  auto etcd_store = store::EtcdStore::Open(client(), so);
  ASSERT_TRUE(etcd_store.ok()) << etcd_store.status().ToString();
  auto cp = ControlPlane::Create(config_, clock_, std::move(etcd_store).value());
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  Archive(**cp);
  auto agent = Connect(**cp);
  ASSERT_TRUE((*cp)->Submit(Spec("ann", "vision"), "key-1").ok());
  (*cp)->RunOnce();
  RunFor(**cp, agent, 1, 1'000);
  clock_.AdvanceMs(120'000);
  auto keys = client()->Range("/gpusched/k/", store::EtcdClient::PrefixEnd("/gpusched/k/"));
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->kvs.size(), 1u) << "the submission's key was not stored";
  auto moved = (*cp)->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1u);
  for (const std::string prefix : {"/gpusched/t/", "/gpusched/s/", "/gpusched/k/", "/gpusched/ki/"}) {
    auto left = client()->Range(prefix, store::EtcdClient::PrefixEnd(prefix));
    ASSERT_TRUE(left.ok());
    EXPECT_TRUE(left->kvs.empty()) << prefix << " still holds " << left->kvs.size();
  }
  auto shown = (*cp)->GetTask(1);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->task.state, core::TaskState::kSucceeded);
  auto taker = store::EtcdStore::Open(client(), {});
  ASSERT_TRUE(taker.ok());
  auto live = (*taker)->LoadLiveTasks();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(live->tasks.empty());
  EXPECT_EQ(live->max_id, 1u);
}

}  // namespace
// Archiving deletes in commits the store takes: with etcd's operations per Txn cut to 16,
// twenty tasks with a key each (four operations apiece) go in several commits, the first
// attempt refused as too large and halved, and nothing is left behind.
TEST_F(HistoryTest, Issue38_DeletionsAreSplitToFitTheStoresLimitsAndHalvedWhenRefused) {
  if (!store::LocalEtcd::Installed()) GTEST_SKIP() << "etcd is not installed";
  store::LocalEtcd::Options eo;
  eo.dir = (dir_ / "etcd").string();
  eo.members = 1;
  auto etcd = store::LocalEtcd::Start(eo);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  store::EtcdStore::Options so;
  so.max_txn_ops = 16;
  auto opened = store::EtcdStore::Open(
      std::move(store::EtcdClient::Create((*etcd)->client_url_list())).value(), so);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store::EtcdStore* raw = opened->get();
  auto cp = ControlPlane::Create(config_, clock_, std::move(opened).value());
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  Archive(**cp);
  auto agent = Connect(**cp);
  for (int i = 1; i <= 20; ++i) {
    ASSERT_TRUE((*cp)->Submit(Spec("ann", "vision", 0), "key-" + std::to_string(i)).ok());
  }
  (*cp)->RunOnce();
  for (uint64_t id = 1; id <= 20; ++id) RunFor(**cp, agent, id, 10);
  clock_.AdvanceMs(120'000);
  const int64_t txns_before = raw->stats().txns;
  auto moved = (*cp)->ArchiveHistory();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 20u);
  EXPECT_GE(raw->stats().txns - txns_before, 6) << "20 tasks at 3 a commit";
  auto left = raw->ListTasks(std::nullopt, 0, 100);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->tasks.empty()) << left->tasks.size() << " tasks left in etcd";
  EXPECT_FALSE(raw->LookupIdempotencyKey("key-7").value().has_value());
}

}  // namespace gpusched::server
