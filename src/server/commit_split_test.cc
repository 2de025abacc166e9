// Issue 38: the control plane against a real etcd (EtcdStore): a commit is one transaction,
// a submission larger than one is stored in parts and answered for what is stored, and a
// commit whose outcome is unknown is never answered "not stored".
#include <gtest/gtest.h>

#include <optional>

#include "base/testing/test_dir.h"
#include "server/control_plane.h"
#include "store/etcd_store.h"
#include "store/local_etcd.h"
#include "store/testing/faulty_proxy.h"
#include "store/testing/faulty_store.h"

namespace gpusched::server {
namespace {

using store::EtcdStore;
using store::testing::FaultyProxy;
using store::testing::FaultyStore;

class CommitSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!store::LocalEtcd::Installed()) GTEST_SKIP() << "etcd is not installed";
    store::LocalEtcd::Options o;
    o.dir = (dir_ / "etcd").string();
    o.members = 1;
    auto e = store::LocalEtcd::Start(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    etcd_ = std::move(e).value();
  }
  // A store on etcd (through `endpoint` when given), max_txn_ops 128; `raw` points at it.
  std::unique_ptr<EtcdStore> Etcd(EtcdStore::Options o = {}, std::string endpoint = "",
                                  int timeout_ms = 2'000) {
    store::EtcdClient::Options co;
    co.request_timeout_ms = timeout_ms;
    auto c = store::EtcdClient::Create(
        {endpoint.empty() ? etcd_->client_url_list()[0] : endpoint}, co);
    EXPECT_TRUE(c.ok());
    o.max_txn_ops = 128;
    auto s = EtcdStore::Open(std::move(c).value(), std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::unique_ptr<ControlPlane> Start(std::unique_ptr<store::StateStore> store) {
    auto cp = ControlPlane::Create(config_, clock_, std::move(store));
    EXPECT_TRUE(cp.ok()) << cp.status().ToString();
    return std::move(cp).value();
  }
  static core::TaskSpec Spec() {
    core::TaskSpec s;
    s.gpus = 1;
    s.command = {"true"};
    return s;
  }
  static std::vector<core::TaskSpec> Array(int64_t n) {
    auto specs = ControlPlane::ArraySpecs(Spec(), IndexRange{0, n - 1});
    EXPECT_TRUE(specs.ok());
    return std::move(specs).value();
  }
  static int64_t Listed(ControlPlane& cp) {
    auto page = cp.ListTasks(std::nullopt, 0, 0);
    EXPECT_TRUE(page.ok());
    return page.ok() ? static_cast<int64_t>(page->tasks.size()) : -1;
  }

  gpusched::testing::TestDir dir_{"gpusched_commit_split_test"};
  std::unique_ptr<store::LocalEtcd> etcd_;
  ServerConfig config_;
  FakeClock clock_{1'000'000};
};

TEST_F(CommitSplitTest, Issue38_A300TaskArrayIsStoredInSeveralCommitsEachOneTxn) {
  auto owned = Etcd();
  EtcdStore* etcd = owned.get();
  auto cp = Start(std::move(owned));
  const EtcdStore::Stats before = etcd->stats();
  auto ids = cp->SubmitArray(Spec(), IndexRange{0, 299}, "big-array");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 300u);
  for (size_t i = 0; i < ids->size(); ++i) EXPECT_EQ((*ids)[i].value(), (*ids)[0].value() + i);
  const EtcdStore::Stats after = etcd->stats();
  EXPECT_GE(after.commits - before.commits, 3);  // 300 tasks, 127 operations per Txn at most
  EXPECT_EQ(after.txns - before.txns, after.commits - before.commits);
  // A new leader finds every task, and the key's retry the same ids.
  cp.reset();
  auto next = Start(Etcd());
  EXPECT_EQ(Listed(*next), 300);
  auto retried = next->SubmitArray(Spec(), IndexRange{0, 299}, "big-array");
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(*retried, *ids);
}

// The second part's commit fails (etcd said no): the first part stays stored and runs, the
// rest is withdrawn, and the answer names what is stored; so does a retry with the key.
TEST_F(CommitSplitTest, Issue38_AnArrayWhosePartFailsNamesTheStoredTasksAndARetryFindsThem) {
  auto faulty = std::make_unique<FaultyStore>(Etcd());
  FaultyStore* faults = faulty.get();
  auto cp = Start(std::move(faulty));
  std::optional<StatusOr<std::vector<TaskId>>> answer;
  cp->PostSubmissions(Array(300), "split-key",
                      [&](StatusOr<std::vector<TaskId>> r) { answer = std::move(r); });
  cp->RunOnce();  // admits, stores the first part
  EXPECT_FALSE(answer.has_value());
  EXPECT_EQ(faults->commits(), 1);
  faults->FailNextCommits(1);
  cp->RunOnce();  // the second part's commit fails
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->status().code(), StatusCode::kFailedPrecondition) << answer->status().ToString();
  EXPECT_NE(answer->status().message().find("stored in part"), std::string::npos);
  EXPECT_EQ(faults->commits(), 1);
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(1'000);
    cp->RunOnce();
  }
  cp.reset();
  auto next = Start(Etcd());
  const int64_t found = Listed(*next);
  EXPECT_GT(found, 0);
  EXPECT_LT(found, 300);
  EXPECT_NE(answer->status().message().find("tasks 1-" + std::to_string(found) + " (the first " +
                                            std::to_string(found) + " of 300)"),
            std::string::npos)
      << answer->status().ToString();
  auto retried = next->SubmitArray(Spec(), IndexRange{0, 299}, "split-key");
  ASSERT_EQ(retried.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(retried.status().message().find("tasks 1-" + std::to_string(found) + " "),
            std::string::npos)
      << retried.status().ToString();
}

// The server stops between two parts: the answer names the stored part, not "nothing was
// queued", and the rest is never stored.
TEST_F(CommitSplitTest, Issue38_StoppingBetweenPartsNamesTheStoredOnes) {
  auto cp = Start(Etcd());
  std::optional<StatusOr<std::vector<TaskId>>> answer;
  cp->PostSubmissions(Array(300), "stop-key",
                      [&](StatusOr<std::vector<TaskId>> r) { answer = std::move(r); });
  cp->RunOnce();  // the first part
  const int64_t stored = Listed(*cp);
  cp->StopLoop();
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->status().code(), StatusCode::kFailedPrecondition) << answer->status().ToString();
  cp.reset();
  auto next = Start(Etcd());
  const int64_t found = Listed(*next);
  EXPECT_GT(found, 0);
  EXPECT_EQ(found, stored);  // the held rest was never stored
  EXPECT_NE(answer->status().message().find("the first " + std::to_string(found) + " of 300"),
            std::string::npos)
      << answer->status().ToString();
}

// The commit is held on its way to etcd and lands after the client gave up: the submitter is
// told the outcome is unknown (retry with the key), never "not stored"; the server's store
// steps down, and the next leader finds the task. (No key: its lookup would be the request
// the proxy holds.)
TEST_F(CommitSplitTest, Issue38_ACommitOfUnknownOutcomeIsNeverAnsweredNotStored) {
  const std::string real = etcd_->client_url_list()[0];
  FaultyProxy proxy(std::stoi(real.substr(real.rfind(':') + 1)));
  int fenced = 0;
  EtcdStore::Options o;
  o.on_fenced = [&](const Status&) { ++fenced; };
  auto cp = Start(Etcd(o, proxy.url(), 300));
  std::optional<StatusOr<std::vector<TaskId>>> answer;
  proxy.Arm(FaultyProxy::Fault::kHold);
  cp->PostSubmissions({Spec()}, "",
                      [&](StatusOr<std::vector<TaskId>> r) { answer = std::move(r); });
  cp->RunOnce();
  ASSERT_TRUE(proxy.WaitFaulted(5'000));
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->status().code(), StatusCode::kUnavailable) << answer->status().ToString();
  EXPECT_NE(answer->status().message().find("same idempotency key"), std::string::npos);
  EXPECT_EQ(fenced, 1);
  ASSERT_FALSE(proxy.Release().empty());  // lands now
  cp.reset();
  auto next = Start(Etcd());
  EXPECT_EQ(Listed(*next), 1);
  EXPECT_TRUE(next->GetTask(1).ok());
}

// The second part's commit is held and lands late: the submitter is told the outcome is
// unknown; after the late landing a new leader's retry with the key finds exactly the parts
// stored (the first two), names them, and the withdrawn rest is never stored.
TEST_F(CommitSplitTest, Issue38_APartOfUnknownOutcomeIsFoundByTheRetryWithItsKey) {
  const std::string real = etcd_->client_url_list()[0];
  FaultyProxy proxy(std::stoi(real.substr(real.rfind(':') + 1)));
  auto cp = Start(Etcd({}, proxy.url(), 300));
  std::optional<StatusOr<std::vector<TaskId>>> answer;
  cp->PostSubmissions(Array(300), "late-key",
                      [&](StatusOr<std::vector<TaskId>> r) { answer = std::move(r); });
  cp->RunOnce();  // reads the key, stores the first part
  ASSERT_FALSE(answer.has_value());
  proxy.Arm(FaultyProxy::Fault::kHold);
  cp->RunOnce();  // the second part's Txn is held
  ASSERT_TRUE(proxy.WaitFaulted(5'000));
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->status().code(), StatusCode::kUnavailable) << answer->status().ToString();
  ASSERT_FALSE(proxy.Release().empty());  // lands now
  cp.reset();
  auto next = Start(Etcd());
  const int64_t found = Listed(*next);
  EXPECT_GT(found, 0);  // two parts, their size as the store's limits allow
  EXPECT_LT(found, 300);
  auto retried = next->SubmitArray(Spec(), IndexRange{0, 299}, "late-key");
  ASSERT_EQ(retried.status().code(), StatusCode::kFailedPrecondition)
      << retried.status().ToString();
  EXPECT_NE(retried.status().message().find("tasks 1-" + std::to_string(found) + " (the first " +
                                            std::to_string(found) + " of 300)"),
            std::string::npos)
      << retried.status().ToString();
  EXPECT_EQ(Listed(*next), found);
}

}  // namespace
}  // namespace gpusched::server

namespace gpusched::server {
namespace {

// A client whose first attempt timed out sends the same key again while the parts are still
// being stored: the retry finds the first parts in the store, and waits for the rest like the
// first attempt, never answering "stored in part" for work that is still on its way.
TEST_F(CommitSplitTest, Issue38_ARetryWhileTheLaterPartsAreStoredWaitsForAllOfThem) {
  auto cp = Start(Etcd());
  std::optional<StatusOr<std::vector<TaskId>>> first, retry;
  cp->PostSubmissions(Array(300), "slow-key",
                      [&](StatusOr<std::vector<TaskId>> r) { first = std::move(r); });
  cp->RunOnce();  // admits, stores the first part
  ASSERT_FALSE(first.has_value());
  cp->PostSubmissions(Array(300), "slow-key",
                      [&](StatusOr<std::vector<TaskId>> r) { retry = std::move(r); });
  for (int i = 0; i < 20 && !(first && retry); ++i) cp->RunOnce();
  ASSERT_TRUE(first.has_value() && retry.has_value());
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  ASSERT_TRUE(retry->ok()) << retry->status().ToString();
  EXPECT_EQ(**retry, **first);
  EXPECT_EQ(Listed(*cp), 300);
}

}  // namespace
}  // namespace gpusched::server
