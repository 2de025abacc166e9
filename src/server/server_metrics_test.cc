// The /metrics page (server_metrics.h) from a real scheduler and task index, without a
// control plane.

#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::server {
namespace {

using core::testing::kGiB;

class ServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = core::Scheduler::Create({}, clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sched_ = std::move(*s);
    ASSERT_TRUE(sched_->RegisterNode(core::testing::MakeNode("n1", 2, 16 * kGiB)).ok());
  }
  std::string Render(bool with_teams = true, bool writable = true) {
    return metrics_.Render({*sched_, index_, 4, writable}, with_teams);
  }
  static bool Has(const std::string& page, const std::string& line) {
    return page.find("\n" + line + "\n") != std::string::npos;
  }

  FakeClock clock_{1'000'000};
  std::unique_ptr<core::Scheduler> sched_;
  TaskIndex index_;
  ServerMetrics metrics_;
};

TEST_F(ServerMetricsTest, Issue40_ThePageSaysWhatTheSchedulerTheIndexAndTheCountersHold) {
  // Three tasks of 10 GiB on two 16 GiB GPUs: two placed, one waits in the failure queue
  // (CN115981827A: a task that found no node).
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sched_->Submit(core::testing::SharedTask(10 * kGiB)).ok());
  sched_->Schedule();
  index_.Put(1, core::TaskState::kSucceeded, clock_.NowMs());
  metrics_.AddSubmitted(3);
  metrics_.AddStoreError();
  metrics_.SetQuarantined(2);
  metrics_.ObserveCommit(0.0002);
  const std::string page = Render();
  EXPECT_TRUE(Has(page, "gpusched_queue_depth{queue=\"main\"} 0")) << page;
  EXPECT_TRUE(Has(page, "gpusched_queue_depth{queue=\"retry\"} 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_decisions_total{result=\"waiting\"} 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_tasks{state=\"succeeded\"} 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_tasks_submitted_total 3")) << page;
  EXPECT_TRUE(Has(page, "gpusched_decisions_total{result=\"placed\"} 2")) << page;
  EXPECT_TRUE(Has(page, "gpusched_filter_workers 4")) << page;
  EXPECT_TRUE(Has(page, "gpusched_store_errors_total 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_store_quarantined_rows 2")) << page;
  EXPECT_TRUE(Has(page, "gpusched_store_commit_seconds_count 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_store_writable 1")) << page;
  EXPECT_TRUE(Has(page, "gpusched_node_gpu_memory_mib{node=\"n1\",gpu=\"1\",kind=\"allocated\"} 10240"))
      << page;
  EXPECT_TRUE(Has(page, "gpusched_node_up{node=\"n1\"} 1")) << page;
}

TEST_F(ServerMetricsTest, Issue40_FamiliesComeInTheirOrderAndTeamsOnlyWhenAsked) {
  const std::string page = Render();
  const size_t tasks = page.find("# TYPE gpusched_queue_depth");
  const size_t passes = page.find("# TYPE gpusched_scheduling_passes_total");
  const size_t teams = page.find("# TYPE gpusched_team_gpus_in_use");
  const size_t reclaims = page.find("# TYPE gpusched_quota_reclaims_total");
  const size_t store = page.find("# TYPE gpusched_store_errors_total");
  const size_t nodes = page.find("# TYPE gpusched_node_up");
  ASSERT_NE(nodes, std::string::npos);
  EXPECT_LT(tasks, passes);
  EXPECT_LT(passes, teams);
  EXPECT_LT(teams, reclaims);
  EXPECT_LT(reclaims, store);
  EXPECT_LT(store, nodes);
  const std::string without = Render(/*with_teams=*/false, /*writable=*/false);
  EXPECT_EQ(without.find("gpusched_team_"), std::string::npos);
  EXPECT_NE(without.find("gpusched_quota_reclaims_total"), std::string::npos);
  EXPECT_TRUE(Has(without, "gpusched_store_writable 0")) << without;
}

}  // namespace
}  // namespace gpusched::server
