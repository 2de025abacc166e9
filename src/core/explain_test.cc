// `why`: explanations built from the last decision's per-filter counts and score breakdown.

#include <cstdio>

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;

TEST_F(SchedulerTest, ExplainCountsEveryRejectionByFilter) {
  for (int i = 0; i < 80; ++i) AddNode(MakeNode("small-" + std::to_string(i), 1, 8 * kGiB));
  for (int i = 0; i < 40; ++i) {
    const std::string name = "far-" + std::to_string(i);
    AddNode(MakeNode(name, 8, 80 * kGiB));
    ASSERT_TRUE(sched_->SetNodeReachable(name, false).ok());
  }
  const TaskId id = Submit(SharedTask(20 * kGiB));
  sched_->Schedule();
  auto e = sched_->Explain(id);
  ASSERT_TRUE(e.ok());
  // A task waiting in FQ for capacity says so first (issue 37), then the pass's reason.
  EXPECT_EQ(e->summary,
            "waits for capacity: retried on the next release or within 30s; last pass: "
            "0/120 nodes fit: 80 insufficient GPU memory, 40 unreachable");
  EXPECT_EQ(e->pass, 1);
  EXPECT_EQ(e->queue, "FQ");
  EXPECT_EQ(e->placement_failures, 1);
  EXPECT_EQ(e->claim, ClaimStatus::kFailed);
}

TEST_F(SchedulerTest, ExplainOfAPlacedTaskGivesTheScoreBreakdown) {
  AddNode(MakeNode("a", 2, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Schedule();
  auto e = sched_->Explain(id);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, TaskState::kAssigned);
  ASSERT_EQ(e->last_report.breakdown.size(), 2u);
  EXPECT_EQ(e->last_report.breakdown[0].name, "LeastAllocated");
  EXPECT_EQ(e->last_report.breakdown[1].name, "BalancedAllocation");
  // CPU 0/64 cores, RAM 0/512 GiB, GPU memory 8/32 GiB: LeastAllocated = (100+100+75)/3.
  EXPECT_NEAR(e->last_report.breakdown[0].value, 91.67, 0.01);
  EXPECT_EQ(e->summary.rfind("placed on a (score ", 0), 0u) << e->summary;
}

// DescribeReport writes scores without printf (a pass describes every placement): the text
// is still printf's "%.1f", ties and large values included.
TEST(DescribeReportTest, ScoresReadAsPrintfWouldWriteThem) {
  PlacementReport report;
  report.chosen_node = "n-1";
  const double values[] = {0.25, 0.35, 81.25, -0.05, 99.95, 1e20, 0.0, -0.0, 1e300};
  for (double v : values) {
    report.score = v;
    report.breakdown = {{"LeastAllocated", v / 3, 1}, {"BalancedAllocation", v + 0.05, 1}};
    char expected[1024];
    std::snprintf(expected, sizeof expected,
                  "placed on n-1 (score %.1f: LeastAllocated %.1f, BalancedAllocation %.1f)", v,
                  v / 3, v + 0.05);
    EXPECT_EQ(DescribeReport(report), expected) << v;
  }
  report.breakdown.clear();
  report.score = 12.34;
  report.topology_rule = "NVLink pair";
  EXPECT_EQ(DescribeReport(report), "placed on n-1 (score 12.3); NVLink pair");
}

TEST_F(SchedulerTest, ExplainOfFailedAndUnknownTasks) {
  SchedulerConfig config;
  config.fail_max = 0;
  Init(config);
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(kGiB));
  sched_->Schedule();
  StartAssigned();
  ASSERT_TRUE(sched_->TaskFinished(id, 1, 3, 0).ok());
  auto e = sched_->Explain(id);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, TaskState::kFailed);
  EXPECT_EQ(e->summary, "exited with code 3 (failed 1 time, 0 retries allowed)");
  EXPECT_EQ(sched_->Explain(TaskId(77)).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpusched::core
