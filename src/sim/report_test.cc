// Metrics definitions, the JSON contract of `sim --json`, and the FGD allocation replay.

#include "sim/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "base/rng.h"
#include "sim/cluster_spec.h"
#include "sim/synthetic.h"
#include "sim/testing/test_data.h"

namespace gpusched::sim {
namespace {

using testing::kData;

TEST(ReportTest, JsonHasTheContractKeys) {
  auto trace = LoadTrace(kData + "/tiny_nonpreemptive.csv", TraceFormat::kCsv);
  ASSERT_TRUE(trace.ok());
  SimOptions options;
  options.policy = Policy::kFifo;
  auto r = RunSimulation(*trace, *ParseClusterSpec("1x4"), options);
  ASSERT_TRUE(r.ok());
  std::ostringstream out;
  RunInfo info;
  info.policy = "fifo";
  WriteJson(out, *r, info);
  const std::string json = out.str();
  for (const char* key : {"\"jobs\": 5", "\"avg_jct_s\": 114", "\"p50_jct_s\": 110",
                          "\"p99_jct_s\": 130", "\"avg_wait_s\": 81", "\"makespan_s\": 150",
                          "\"gpu_utilization\": ", "\"policy\": \"fifo\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  EXPECT_EQ(json.find("wall_s"), std::string::npos);  // not measured: not printed
}

TEST(ReportTest, JobsCsvRow) {
  auto trace = LoadTrace(kData + "/tiny_nonpreemptive.csv", TraceFormat::kCsv);
  SimOptions options;
  options.policy = Policy::kSjf;
  auto r = RunSimulation(*trace, *ParseClusterSpec("1x4"), options);
  ASSERT_TRUE(r.ok());
  std::ostringstream out;
  WriteJobsCsv(out, *r);
  EXPECT_NE(out.str().find("J3,2,2,30.000,45.000,55.000,10.000,25.000,15.000,0,finished\n"),
            std::string::npos)
      << out.str();
}

// Nodes n0 (2 GPUs) and n1 (1 GPU); pods: two halves of a GPU, then one of 2 whole GPUs.
// Best fit packs both halves onto n1's GPU and keeps n0 whole for the 2-GPU pod; the
// gpusched placement and worst fit spread the halves over n0, so the 2-GPU pod finds no node.
// min-fragmentation and fgd: every choice leaves the half-GPU shape's fragmentation at 0, so
// best fit breaks the ties and they pack like best fit.
TEST(AllocationReplayTest, BestFitKeepsWholeNodesFree) {
  auto trace = LoadTrace(kData + "/alloc_pods.csv", TraceFormat::kAlibaba);
  auto nodes = LoadNodeList(kData + "/alibaba_nodes_sample.csv");
  ASSERT_TRUE(trace.ok() && nodes.ok());
  struct Want {
    PlacementPolicy placement;
    double allocated, unallocated;
  };
  for (const Want& w : {Want{PlacementPolicy::kBestFit, 3, 0},
                        Want{PlacementPolicy::kMinFragmentation, 3, 0},
                        Want{PlacementPolicy::kFgd, 3, 0},
                        Want{PlacementPolicy::kGpusched, 1, 2},
                        Want{PlacementPolicy::kWorstFit, 1, 2}}) {
    SimOptions options;
    options.placement = w.placement;
    options.allocation_replay = true;
    auto r = RunSimulation(*trace, *nodes, options);
    ASSERT_TRUE(r.ok());
    const AllocationResult& a = r->allocation;
    EXPECT_DOUBLE_EQ(a.arrived_gpus, 3) << PlacementPolicyName(w.placement);
    EXPECT_DOUBLE_EQ(a.allocated_gpus, w.allocated) << PlacementPolicyName(w.placement);
    EXPECT_DOUBLE_EQ(a.unallocated_gpus, w.unallocated) << PlacementPolicyName(w.placement);
    EXPECT_DOUBLE_EQ(a.allocation_rate, w.allocated / 3) << PlacementPolicyName(w.placement);
  }
}

TEST(SyntheticTest, SameSeedSameTrace) {
  Rng a(7), b(7);
  const Trace x = GenerateSyntheticTrace(SyntheticOptions{200, 30}, a);
  const Trace y = GenerateSyntheticTrace(SyntheticOptions{200, 30}, b);
  ASSERT_EQ(x.jobs.size(), 200u);
  for (size_t i = 0; i < x.jobs.size(); ++i) {
    EXPECT_EQ(x.jobs[i].submit_ms, y.jobs[i].submit_ms);
    EXPECT_EQ(x.jobs[i].duration_ms, y.jobs[i].duration_ms);
    EXPECT_EQ(x.jobs[i].num_gpu, y.jobs[i].num_gpu);
    EXPECT_GE(x.jobs[i].duration_ms, 1000);
  }
  EXPECT_TRUE(std::is_sorted(x.jobs.begin(), x.jobs.end(), [](const auto& p, const auto& q) {
    return p.submit_ms < q.submit_ms;
  }));
}

}  // namespace
}  // namespace gpusched::sim
