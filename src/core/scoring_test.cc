// CN115981827A claims 4-6: the scoring table, St and Pt.

#include "core/scoring.h"

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
constexpr int64_t kHour = 3'600'000;

TaskScore Score(double cores, int64_t gpu_mib, int64_t mem_mib, double hours) {
  return ScoreTask(ScoringTable::Claim5Default(), static_cast<int64_t>(cores * 1000), gpu_mib,
                   mem_mib, static_cast<int64_t>(hours * kHour));
}

TEST(CN115981827A, Claim5_ScoringTable) {
  TaskScore light = Score(1, 500, 1 * kGiB, 0.5);
  EXPECT_EQ(light.st, 20);
  EXPECT_EQ(light.pt, 5);
  TaskScore heavy = Score(16, 8 * kGiB, 16 * kGiB, 48);
  EXPECT_EQ(heavy.st, 4);
  EXPECT_EQ(heavy.pt, 1);
  TaskScore mid = Score(4, 2 * kGiB, 4 * kGiB, 8);
  EXPECT_EQ(mid.st, 12);
  EXPECT_EQ(mid.pt, 3);
  TaskScore mixed = Score(2, 1 * kGiB, 8 * kGiB, 3);
  EXPECT_EQ(mixed.cpu, 4);
  EXPECT_EQ(mixed.gpu_mem, 4);
  EXPECT_EQ(mixed.mem, 2);
  EXPECT_EQ(mixed.duration, 4);
  EXPECT_EQ(mixed.st, 14);
  EXPECT_EQ(mixed.pt, 3);
}

TEST(CN115981827A, Claim5_DurationBoundaries) {
  const ScoreDimension& d = ScoringTable::Claim5Default().duration_ms;
  EXPECT_EQ(d.Score(1 * kHour), 5);
  EXPECT_EQ(d.Score(6 * kHour), 4);
  EXPECT_EQ(d.Score(24 * kHour), 2);
  EXPECT_EQ(d.Score(static_cast<int64_t>(24.01 * kHour)), 1);
}

TEST(CN115981827A, Claim4_BetweenTiersTakeTheNextTierUp) {
  const ScoringTable t = ScoringTable::Claim5Default();
  EXPECT_EQ(t.cpu_milli.Score(3000), 3);        // 3 cores -> the 4-core tier
  EXPECT_EQ(t.gpu_mem_mib.Score(501), 4);       // just above 500 MiB -> the 1 GiB tier
  EXPECT_EQ(t.mem_mib.Score(17 * kGiB), 1);     // above the top tier
  EXPECT_EQ(t.cpu_milli.Score(0), 5);           // a request of 0
}

// Pt = floor(St / 4) over the table of PATENTS.md section 4: St and Pt worked out by hand
// from the tiers, including sums where rounding would differ from the floor (19, 15, 7, 5).
TEST(CN115981827A, Claim6_PtIsFloorOfStOverFour) {
  struct Case {
    double cores;
    int64_t gpu_mib, mem_mib;
    double hours;
    int st, pt;
  };
  const Case cases[] = {
      {1, 500, 1 * kGiB, 0.5, 20, 5},       // 5+5+5+5
      {2, 500, 1 * kGiB, 0.5, 19, 4},       // 4+5+5+5
      {1, 500, 1 * kGiB, 8, 18, 4},         // 5+5+5+3
      {2, 1 * kGiB, 2 * kGiB, 3, 16, 4},    // 4+4+4+4
      {2, 1 * kGiB, 2 * kGiB, 8, 15, 3},    // 4+4+4+3
      {4, 2 * kGiB, 4 * kGiB, 3, 13, 3},    // 3+3+3+4
      {4, 2 * kGiB, 4 * kGiB, 8, 12, 3},    // 3+3+3+3
      {4, 4 * kGiB, 8 * kGiB, 20, 9, 2},    // 3+2+2+2
      {8, 4 * kGiB, 8 * kGiB, 20, 8, 2},    // 2+2+2+2
      {8, 4 * kGiB, 8 * kGiB, 48, 7, 1},    // 2+2+2+1
      {16, 8 * kGiB, 16 * kGiB, 20, 5, 1},  // 1+1+1+2
      {16, 8 * kGiB, 16 * kGiB, 48, 4, 1},  // 1+1+1+1
  };
  for (const Case& c : cases) {
    const TaskScore s = Score(c.cores, c.gpu_mib, c.mem_mib, c.hours);
    EXPECT_EQ(s.st, c.st) << c.cores << " cores, " << c.gpu_mib << " MiB, " << c.hours << " h";
    EXPECT_EQ(s.pt, c.pt) << "St " << c.st;
  }
}

TEST(ScoringTable, ValidateNamesTheBadTier) {
  ScoringTable t = ScoringTable::Claim5Default();
  t.mem_mib.tiers[2].threshold = 1;  // not ascending
  Status s = t.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scoring.mem.tiers[2]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gpusched::core
