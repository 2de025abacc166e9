// The golden fixture (../shared/traces/golden/philly_small500.csv) on --cluster 1x64 under
// every policy. Skipped when the shared traces are absent. The pinned numbers are regression
// values of this simulator (README.md lists them); the invariants below hold for any policy.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "sim/cluster_spec.h"
#include "sim/simulator.h"

namespace gpusched::sim {
namespace {

const std::string kGolden =
    std::string(GPUSCHED_SHARED_TRACES) + "/golden/philly_small500.csv";

class GoldenTest : public ::testing::TestWithParam<Policy> {};

TEST_P(GoldenTest, Philly500On1x64) {
  if (!std::filesystem::exists(kGolden)) GTEST_SKIP() << "no shared traces at " << kGolden;
  auto trace = LoadTrace(kGolden, TraceFormat::kCsv);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 500u);
  SimOptions options;
  options.policy = GetParam();
  auto r = RunSimulation(*trace, *ParseClusterSpec("1x64"), options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.jobs, 500);
  EXPECT_EQ(s.rejected + s.unfinished, 0);
  // The trace needs 4,239 GPU-hours: no policy can finish before 4239 / 64 h.
  EXPECT_GE(s.makespan_s, 4239.0 * 3600 / 64 * 0.99);
  EXPECT_LE(s.gpu_utilization, 1.0);
  for (const JobRecord& j : r->jobs) {
    ASSERT_GE(j.finish_ms - j.submit_ms, j.duration_ms) << j.id;
  }
  static const std::map<Policy, double> kAvgJct = {
      {Policy::kGpusched, 31056.374}, {Policy::kFifo, 75800.904}, {Policy::kFifoBackfill, 30845.348},
      {Policy::kSjf, 16884.514},      {Policy::kSrtf, 10244.192}, {Policy::kLas, 11700.710},
      {Policy::kDlas, 10712.652}};
  std::printf("golden %s: jobs %lld avg_jct_s %.3f p50 %.3f p99 %.3f wait %.3f makespan %.3f "
              "util %.6f preemptions %lld\n",
              PolicyName(GetParam()), static_cast<long long>(s.jobs), s.avg_jct_s, s.p50_jct_s,
              s.p99_jct_s, s.avg_wait_s, s.makespan_s, s.gpu_utilization,
              static_cast<long long>(s.preemptions));
  EXPECT_NEAR(s.avg_jct_s, kAvgJct.at(GetParam()), 0.01);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, GoldenTest, ::testing::ValuesIn(AllPolicies()),
                         [](const ::testing::TestParamInfo<Policy>& param) {
                           std::string n = PolicyName(param.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// Issue goal: the 2D-LAS policy, which needs no durations, stays within 10 % of the oracle
// SRTF's average JCT on the golden slice.
TEST(GoldenGoalTest, DlasIsWithinTenPercentOfOracleSrtf) {
  if (!std::filesystem::exists(kGolden)) GTEST_SKIP() << "no shared traces at " << kGolden;
  auto trace = LoadTrace(kGolden, TraceFormat::kCsv);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const auto nodes = *ParseClusterSpec("1x64");
  SimOptions options;
  options.policy = Policy::kSrtf;
  auto srtf = RunSimulation(*trace, nodes, options);
  options.policy = Policy::kDlas;
  auto dlas = RunSimulation(*trace, nodes, options);
  ASSERT_TRUE(srtf.ok() && dlas.ok());
  EXPECT_LE(dlas->summary.avg_jct_s, 1.10 * srtf->summary.avg_jct_s);
}

}  // namespace
}  // namespace gpusched::sim
