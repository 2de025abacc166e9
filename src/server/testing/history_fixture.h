#pragma once
// The fixture of the bounded-history tests (issue 38: history_test.cc, rollups_test.cc): a
// ControlPlane on the fake clock over a store wrapped in a FaultyStore, an agent of four
// 80 GiB GPUs, and `acct` as the REST API and the CLI run it. The loop thread is not started.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/testing/test_dir.h"
#include "server/accounting.h"
#include "server/api_convert.h"
#include "server/control_plane.h"
#include "server/testing/fake_agent_channel.h"
#include "store/etcd_store.h"
#include "store/local_etcd.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/task_archive.h"
#include "store/testing/faulty_store.h"

namespace gpusched::server::testing {

using store::testing::FaultyStore;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.history_retention_ms = 60'000;
    config_.retain_finished = 0;  // finished tasks leave memory at once: the store has them
  }
  // The control plane over `kind` ("sqlite", "memory", or "etcd": a real one, started here;
  // REQUIRES: LocalEtcd::Installed()), wrapped in a FaultyStore.
  std::unique_ptr<ControlPlane> Start(const std::string& kind = "sqlite") {
    auto faulty = std::make_unique<FaultyStore>(OpenStore(kind));
    store_ = faulty.get();
    auto cp = ControlPlane::Create(config_, clock_, std::move(faulty));
    EXPECT_TRUE(cp.ok()) << cp.status().ToString();
    return std::move(cp).value();
  }
  store::SqliteArchive* Archive(ControlPlane& cp) {
    auto a = store::SqliteArchive::Open((dir_ / "archive.db").string());
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    store::SqliteArchive* raw = a->get();
    cp.SetArchive(std::move(a).value());
    return raw;
  }
  std::shared_ptr<FakeAgentChannel> Connect(ControlPlane& cp) {
    AgentRegistration r;
    r.spec.name = "n1";
    r.spec.address = "127.0.0.1:1";
    r.spec.capacity = {64'000, 256 * 1024};
    r.spec.gpus.assign(4, core::GpuSpec{"A100", 81920});
    auto ch = std::make_shared<FakeAgentChannel>();
    EXPECT_TRUE(cp.AgentRegistered(r, ch).ok());
    return ch;
  }
  static core::TaskSpec Spec(const std::string& user, const std::string& team, int gpus = 1) {
    core::TaskSpec s;
    s.gpus = gpus;
    s.command = {"true"};
    s.max_retries = 0;
    s.user = user;
    s.team = team;
    return s;
  }
  static TaskReport Report(uint64_t id, TaskReport::Kind kind) {
    TaskReport st;
    st.id = TaskId(id);
    st.attempt = 1;
    st.kind = kind;
    return st;
  }
  // Runs `id` (placed already) for `ms`, then lets it end with `exit_code`.
  void RunFor(ControlPlane& cp, const std::shared_ptr<FakeAgentChannel>& agent, uint64_t id,
              DurationMs ms, int exit_code = 0) {
    cp.AgentMessage("n1", Report(id, TaskReport::Kind::kStarted), agent);
    cp.RunOnce();
    clock_.AdvanceMs(ms);
    TaskReport end = Report(id, TaskReport::Kind::kFinished);
    end.exit_code = exit_code;
    cp.AgentMessage("n1", end, agent);
    cp.RunOnce();
  }
  std::vector<AccountingGroup> Acct(ControlPlane& cp, AccountingQuery::By by) {
    AccountingQuery q;
    q.by = by;
    q.since_ms = 0;
    q.step_ms = 3'600'000;
    q.until_ms = (clock_.NowMs() / q.step_ms + 1) * q.step_ms;  // whole hours (rollups)
    return Acct(cp, q, {});
  }
  // `q` at the clock's now, with `totals` as the GPUs' memory (the server's: cp.GpuTotalMib()).
  std::vector<AccountingGroup> Acct(ControlPlane& cp, AccountingQuery q, GpuTotals totals) {
    q.now_ms = clock_.NowMs();
    Accounting acct(q, std::move(totals));
    auto groups = CollectAccounting(cp, acct, q);
    EXPECT_TRUE(groups.ok()) << groups.status().ToString();
    return groups.ok() ? *groups : std::vector<AccountingGroup>{};
  }

  std::unique_ptr<store::StateStore> OpenStore(const std::string& kind) {
    if (kind == "memory") return std::make_unique<store::MemoryStore>();
    if (kind == "etcd") {
      store::LocalEtcd::Options eo;
      eo.dir = (dir_ / "etcd").string();
      eo.members = 1;
      auto etcd = store::LocalEtcd::Start(eo);
      EXPECT_TRUE(etcd.ok()) << etcd.status().ToString();
      etcd_ = std::move(etcd).value();
      auto opened = store::EtcdStore::Open(
          std::move(store::EtcdClient::Create(etcd_->client_url_list())).value(), etcd_options_);
      EXPECT_TRUE(opened.ok()) << opened.status().ToString();
      return std::move(opened).value();
    }
    auto db = store::SqliteStore::Open((dir_ / "state.db").string(), {});
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return std::move(db).value();
  }

  gpusched::testing::TestDir dir_{"gpusched_history_test"};
  std::unique_ptr<store::LocalEtcd> etcd_;  // "etcd" stores only
  store::EtcdStore::Options etcd_options_;  // what "etcd" stores are opened with
  ServerConfig config_;
  FakeClock clock_{1'000'000'000};
  FaultyStore* store_ = nullptr;  // owned by the control plane
};

}  // namespace gpusched::server::testing
