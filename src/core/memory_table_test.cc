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
  table.RestoreLearned(Resnet(32), INT64_MAX / 2, 3);
  auto est = table.Estimate(Resnet(32));
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->mib, 5000);
  EXPECT_EQ(table.Learned(Resnet(32)).second, 0);
}

TEST(GpuMemoryTable, RejectsBadRowsNamingTheField) {
  GpuMemoryTable table;
  EXPECT_NE(table.AddRow({Resnet(0), 100}).message().find("batch"), std::string::npos);
  EXPECT_NE(table.AddRow({Resnet(1), -5}).message().find("mib"), std::string::npos);
  EXPECT_EQ(table.rows().size(), 0u);
}

}  // namespace
}  // namespace gpusched::core
