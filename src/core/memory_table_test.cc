// CN109992422A claim 1: the GPU-memory table.

#include "core/memory_table.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace gpusched::core {
namespace {

MemoryProfile Resnet(int64_t batch, int64_t h = 224, int64_t w = 224) {
  return {"classify", "resnet50", batch, h, w};
}

TEST(CN109992422A, Claim1_TableRowReturnedExactly) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddRow({Resnet(32), 5000}).ok());
  auto est = table.Estimate(Resnet(32));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 5000);
  EXPECT_EQ(est->source, "table");
}

TEST(CN109992422A, Claim1_FallbackFormulaScalesWithBatchAndInputSize) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddFormula({"resnet50", 1000, 100.0, 224, 224}).ok());
  // base + per_img * batch * (h*w)/(h0*w0) = 1000 + 100 * 8 * 4 = 4200
  auto est = table.Estimate(Resnet(8, 448, 448));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 4200);
  EXPECT_EQ(est->source, "formula");
}

TEST(CN109992422A, Claim1_UnknownModelIsAnError) {
  GpuMemoryTable table;
  auto est = table.Estimate({"detect", "yolo-x", 4, 640, 640});
  ASSERT_FALSE(est.ok());
  EXPECT_NE(est.status().message().find("profile.model: unknown model \"yolo-x\""),
            std::string::npos);
}

TEST(CN109992422A, Claim1_LearnsFromObservedPeaksAndBeatsTheRow) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddRow({Resnet(32), 5000}).ok());
  table.Observe(Resnet(32), 6000);
  table.Observe(Resnet(32), 5500);
  auto est = table.Estimate(Resnet(32));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 6600);  // max peak 6000 + 10 % headroom
  EXPECT_EQ(est->source, "learned");
  // Other profiles are unaffected.
  EXPECT_FALSE(table.Estimate(Resnet(64)).ok());
}

// An agent's report is input: a peak no GPU can have (it would overflow the headroom
// arithmetic of the estimate) teaches nothing; the row stays the estimate.
TEST(CN109992422A, Claim1_AbsurdObservedPeakIsIgnored) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddRow({Resnet(32), 5000}).ok());
  table.Observe(Resnet(32), INT64_MAX / 2);
  table.RestoreLearned(Resnet(32), {INT64_MAX / 2, -1, 0}, 3);
  auto est = table.Estimate(Resnet(32));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 5000);
  EXPECT_EQ(table.Learned(Resnet(32)).second, 0);
}

// Issue 36: the learned peak is the 90th percentile (nearest rank) of the last 20 peaks,
// not the largest ever: one outlier among many runs does not set every task's estimate.
TEST(GpuMemoryTable, Issue36_OneOutlierAmongTwentyDoesNotSetTheEstimate) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddRow({Resnet(32), 5000}).ok());
  table.Observe(Resnet(32), 16000);
  for (int i = 0; i < 19; ++i) table.Observe(Resnet(32), 5000);
  auto est = table.Estimate(Resnet(32));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 5500);  // 5000 + 10 %
  EXPECT_EQ(table.Learned(Resnet(32)), std::make_pair(MiB{5000}, int64_t{20}));
}

TEST(GpuMemoryTable, Issue36_PeaksOlderThanTheWindowAgeOut) {
  GpuMemoryTable table;
  table.Observe(Resnet(32), 16000);
  table.Observe(Resnet(32), 16000);
  EXPECT_EQ(table.Learned(Resnet(32)).first, 16000);
  for (int i = 0; i < 20; ++i) table.Observe(Resnet(32), 4000);
  EXPECT_EQ(table.Learned(Resnet(32)), std::make_pair(MiB{4000}, int64_t{22}));
  EXPECT_EQ(table.learned().at(Resnet(32)).recent.size(), 20u);
}

TEST(GpuMemoryTable, Issue36_PercentileIsNearestRankOfTheKeptPeaks) {
  GpuMemoryTable table({.learned_headroom_percent = 0, .window = 10, .percentile = 90});
  for (MiB m : {1000, 9000, 2000, 8000, 3000, 7000, 4000, 6000, 5000, 10000}) {
    table.Observe(Resnet(8), m);
  }
  EXPECT_EQ(table.Learned(Resnet(8)).first, 9000);  // rank ceil(0.9 * 10) = 9
  table.Observe(Resnet(8), 500);                    // drops the oldest (1000)
  EXPECT_EQ(table.Learned(Resnet(8)).first, 9000);
  GpuMemoryTable median({.learned_headroom_percent = 0, .window = 3, .percentile = 50});
  for (MiB m : {3000, 1000, 2000}) median.Observe(Resnet(8), m);
  EXPECT_EQ(median.Learned(Resnet(8)).first, 2000);  // rank ceil(1.5) = 2
}

TEST(GpuMemoryTable, Issue36_ForgetAndRestore) {
  GpuMemoryTable table;
  ASSERT_TRUE(table.AddRow({Resnet(32), 5000}).ok());
  table.Observe(Resnet(32), 9000);
  EXPECT_EQ(table.Estimate(Resnet(32))->source, "learned");
  EXPECT_TRUE(table.Forget(Resnet(32)));
  EXPECT_FALSE(table.Forget(Resnet(32)));
  EXPECT_EQ(table.Estimate(Resnet(32))->mib, 5000);
  // A restore keeps the newest peaks of the window and at least as many observations.
  std::vector<MiB> stored(25, 3000);
  stored.back() = 4000;
  table.RestoreLearned(Resnet(32), stored, 2);
  EXPECT_EQ(table.learned().at(Resnet(32)).recent.size(), 20u);
  EXPECT_EQ(table.learned().at(Resnet(32)).recent.back(), 4000);
  EXPECT_EQ(table.learned().at(Resnet(32)).observations, 20);
  table.RestoreLearned(Resnet(64), {}, 5);
  EXPECT_EQ(table.learned().count(Resnet(64)), 0u);
}

TEST(GpuMemoryTable, RejectsBadRowsNamingTheField) {
  GpuMemoryTable table;
  EXPECT_NE(table.AddRow({Resnet(0), 100}).message().find("batch"), std::string::npos);
  EXPECT_NE(table.AddRow({Resnet(1), -5}).message().find("mib"), std::string::npos);
  EXPECT_EQ(table.rows().size(), 0u);
}

}  // namespace
}  // namespace gpusched::core
