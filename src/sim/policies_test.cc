// Every policy on tiny traces whose JCTs were computed by hand (the derivations are in
// README.md, "Hand-computed scenarios"), through the production core::Scheduler.

#include <gtest/gtest.h>

#include <map>

#include "sim/cluster_spec.h"
#include "sim/simulator.h"
#include "sim/testing/test_data.h"

namespace gpusched::sim {
namespace {

using testing::kData;

SimResult Simulate(const std::string& file, TraceFormat format, const std::string& cluster,
                   SimOptions options) {
  auto trace = LoadTrace(kData + "/" + file, format);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  auto nodes = ParseClusterSpec(cluster);
  EXPECT_TRUE(nodes.ok());
  auto r = RunSimulation(*trace, *nodes, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

// JCT in seconds by job id.
std::map<std::string, double> Jcts(const SimResult& r) {
  std::map<std::string, double> out;
  for (const JobRecord& j : r.jobs) {
    EXPECT_EQ(j.outcome, JobOutcome::kFinished) << j.id;
    out[j.id] = static_cast<double>(j.finish_ms - j.submit_ms) / 1000.0;
  }
  return out;
}

SimOptions With(Policy p, std::vector<int64_t> las_thresholds_gpu_ms = {}) {
  SimOptions o;
  o.policy = p;
  o.las_thresholds_gpu_ms = std::move(las_thresholds_gpu_ms);
  return o;
}

SimResult Nonpreemptive(Policy p) {
  return Simulate("tiny_nonpreemptive.csv", TraceFormat::kCsv, "1x4", With(p));
}

using JctMap = std::map<std::string, double>;

// J0 2 GPUs at 0 s for 100 s, J1 4 at 10 for 30, J2 1 at 20 for 20, J3 2 at 30 for 10,
// J4 2 at 35 for 5, on 4 GPUs.
// `sim --config` (issue 37): the server's defaults, whose node_lost_after (5m) is shorter than
// the simulator's disabled liveness timeouts, run; the server's order places every job.
TEST(PoliciesTest, Issue37_ServerDefaultsRunThroughConfig) {
  SimOptions o;
  o.config = core::SchedulerConfig();
  const SimResult r = Simulate("tiny_nonpreemptive.csv", TraceFormat::kCsv, "1x4", o);
  EXPECT_EQ(Jcts(r).size(), r.jobs.size());
  EXPECT_FALSE(r.jobs.empty());
}

TEST(PoliciesTest, FifoBlocksBehindTheWideJob) {
  const SimResult r = Nonpreemptive(Policy::kFifo);
  EXPECT_EQ(Jcts(r), (JctMap{{"J0", 100}, {"J1", 120}, {"J2", 130}, {"J3", 110}, {"J4", 110}}));
  EXPECT_DOUBLE_EQ(r.summary.avg_jct_s, 114);
  EXPECT_DOUBLE_EQ(r.summary.avg_wait_s, 81);
  EXPECT_DOUBLE_EQ(r.summary.makespan_s, 150);
  EXPECT_DOUBLE_EQ(r.summary.p50_jct_s, 110);
  EXPECT_DOUBLE_EQ(r.summary.p99_jct_s, 130);
}

TEST(PoliciesTest, FifoBackfillSkipsWhatDoesNotFit) {
  const SimResult r = Nonpreemptive(Policy::kFifoBackfill);
  EXPECT_EQ(Jcts(r), (JctMap{{"J0", 100}, {"J1", 120}, {"J2", 20}, {"J3", 20}, {"J4", 20}}));
  EXPECT_DOUBLE_EQ(r.summary.avg_jct_s, 56);
  EXPECT_DOUBLE_EQ(r.summary.makespan_s, 130);
}

TEST(PoliciesTest, SjfStartsTheShortestFirst) {
  const SimResult r = Nonpreemptive(Policy::kSjf);
  EXPECT_EQ(Jcts(r), (JctMap{{"J0", 100}, {"J1", 120}, {"J2", 20}, {"J3", 25}, {"J4", 10}}));
  EXPECT_DOUBLE_EQ(r.summary.avg_jct_s, 55);
}

// All five tasks score St 16, Pt 4 (no CPU or RAM: 5 + 5; 32 GiB GPUs: 1; <= 1 h: 5). A task
// that does not fit goes to FQ (demoted at the t2 flushes, 30, 60, 90 s), and each release
// re-evaluates FQ in queue order (issue 37): J2's end at 40 s starts J3, J3's end at 50 s J4,
// J0's end at 100 s J1. (Waiting for the flushes instead: J1 140, J3 40, J4 60, avg 72.)
TEST(PoliciesTest, GpuschedParksMisfitsInTheFailureQueueAndAReleaseStartsThem) {
  const SimResult r = Nonpreemptive(Policy::kGpusched);
  EXPECT_EQ(Jcts(r), (JctMap{{"J0", 100}, {"J1", 120}, {"J2", 20}, {"J3", 20}, {"J4", 20}}));
  EXPECT_DOUBLE_EQ(r.summary.avg_jct_s, 56);
  EXPECT_DOUBLE_EQ(r.summary.makespan_s, 130);
}

// P0 4 GPUs at 0 s for 100 s, P1 2 at 10 for 20, P2 2 at 20 for 50, on 4 GPUs.
TEST(PoliciesTest, SrtfPreemptsTheLongestRemaining) {
  const SimResult r =
      Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4", With(Policy::kSrtf));
  EXPECT_EQ(Jcts(r), (JctMap{{"P0", 160}, {"P1", 20}, {"P2", 50}}));
  EXPECT_EQ(r.summary.preemptions, 1);
  EXPECT_DOUBLE_EQ(r.summary.makespan_s, 160);
}

// One threshold at 40 GPU-seconds: P0 drops to queue 1 at 10 s, P2 at 40 s (20 s x 2 GPUs);
// inside queue 1 P0 (earlier) goes first and preempts P2.
TEST(PoliciesTest, LasDemotesAtTheThresholdAndServesFifoInsideAQueue) {
  const SimResult r = Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4",
                               With(Policy::kLas, {40'000}));
  EXPECT_EQ(Jcts(r), (JctMap{{"P0", 130}, {"P1", 20}, {"P2", 140}}));
  EXPECT_EQ(r.summary.preemptions, 2);
}

// 2D-LAS with the same 40 GPU-s threshold: P0 drops to queue 1 at 10 s and P1 preempts it;
// P2 (20-40 s in queue 0) reaches queue 1 at 40 s while running, and inside a queue running
// tasks stay ahead of pending ones, so P2 keeps its GPUs and P0 resumes only at 70 s. Plain
// LAS (above) and FIFO (P0 first: 100, 110, 130) order the same jobs differently.
TEST(PoliciesTest, DlasKeepsRunningTasksAheadInsideAQueue) {
  const SimResult d = Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4",
                               With(Policy::kDlas, {40'000}));
  EXPECT_EQ(Jcts(d), (JctMap{{"P0", 160}, {"P1", 20}, {"P2", 50}}));
  EXPECT_EQ(d.summary.preemptions, 1);
  const SimResult las = Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4",
                                 With(Policy::kLas, {40'000}));
  EXPECT_NE(Jcts(las), Jcts(d));
  const SimResult fifo =
      Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4", With(Policy::kFifo));
  EXPECT_EQ(Jcts(fifo), (JctMap{{"P0", 100}, {"P1", 110}, {"P2", 130}}));
}

// testdata/tiny_starvation.csv on 1x1, 2D-LAS threshold 100 GPU-s: A (1,000 s) from 0 s, then
// B, C, D (90 s each, queue 0) at 150, 240, 330 s. Without the rule A is suspended at 150 s
// and waits until D ends at 420 s. With knob 1, A (executed 150 s, suspended at 150 s) is
// promoted to queue 0 at 300 s; C keeps the GPU (running first), and at 330 s A (submitted
// before D) runs until its queue-0 service reaches 100 s at 430 s; D runs 430-520 s.
TEST(PoliciesTest, DlasStarvationRulePromotesTheWaitingJob) {
  const SimResult off = Simulate("tiny_starvation.csv", TraceFormat::kCsv, "1x1",
                                 With(Policy::kDlas, {100'000}));
  EXPECT_EQ(Jcts(off), (JctMap{{"A", 1270}, {"B", 90}, {"C", 90}, {"D", 90}}));
  EXPECT_EQ(off.stats.las_promotions, 0);
  SimOptions o = With(Policy::kDlas, {100'000});
  o.promote_knob = 1;
  const SimResult on = Simulate("tiny_starvation.csv", TraceFormat::kCsv, "1x1", o);
  EXPECT_EQ(Jcts(on), (JctMap{{"A", 1270}, {"B", 90}, {"C", 90}, {"D", 190}}));
  EXPECT_EQ(on.stats.las_promotions, 1);
  EXPECT_EQ(on.summary.preemptions, 2);
  EXPECT_EQ(on.jobs[3].start_ms, 430'000);
}

TEST(PoliciesTest, PromoteKnobOutOfRangeIsAnError) {
  auto trace = LoadTrace(kData + "/tiny_starvation.csv", TraceFormat::kCsv);
  ASSERT_TRUE(trace.ok());
  SimOptions o = With(Policy::kDlas);
  o.promote_knob = -1;
  auto r = RunSimulation(*trace, *ParseClusterSpec("1x1"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dlas_promote_knob"), std::string::npos);
}

TEST(PoliciesTest, NonPreemptivePoliciesNeverPreempt) {
  for (Policy p : {Policy::kFifo, Policy::kFifoBackfill, Policy::kSjf, Policy::kGpusched}) {
    const SimResult r =
        Simulate("tiny_preemptive.csv", TraceFormat::kCsv, "1x4", With(p));
    EXPECT_EQ(r.summary.preemptions, 0) << PolicyName(p);
    EXPECT_EQ(r.summary.jobs, 3) << PolicyName(p);
  }
}

// Utilisation of fifo-backfill on 4 GPUs over [0, 130]: busy GPU-seconds 2x100 + 4x30 +
// 1x20 + 2x10 + 2x5 = 370 -> 370 / 520.
TEST(PoliciesTest, UtilisationIsBusyGpuTimeOverCapacity) {
  const SimResult r = Nonpreemptive(Policy::kFifoBackfill);
  EXPECT_NEAR(r.summary.gpu_utilization, 370.0 / 520.0, 1e-12);
  EXPECT_NEAR(r.summary.gpu_mem_utilization, 370.0 / 520.0, 1e-12);  // whole GPUs
}

// Without gangs (--no-gangs) a job wider than every node is refused by the core at
// submission and reported; with them J1 (4 GPUs) runs as 2 x 2.
TEST(PoliciesTest, JobsNoNodeCanFitAreRejected) {
  SimOptions no_gangs = With(Policy::kFifoBackfill);
  no_gangs.gangs = false;
  const SimResult r = Simulate("tiny_nonpreemptive.csv", TraceFormat::kCsv, "2x2", no_gangs);
  EXPECT_EQ(r.summary.rejected, 1);
  EXPECT_EQ(r.jobs[1].outcome, JobOutcome::kRejected);
  EXPECT_NE(r.jobs[1].reason.find("gpus: 4 requested but the largest node has 2"),
            std::string::npos);
  const SimResult g = Simulate("tiny_nonpreemptive.csv", TraceFormat::kCsv, "2x2",
                               With(Policy::kFifoBackfill));
  EXPECT_EQ(g.summary.rejected, 0);
  EXPECT_EQ(g.jobs[1].outcome, JobOutcome::kFinished);
}

}  // namespace
}  // namespace gpusched::sim

namespace gpusched::sim {
namespace {

// Fair share across virtual clusters (README "Hand-computed scenarios"): on 1x1, x's X0 holds
// the GPU until 3600 s; X1 (x, at 10 s) and Y0 (y, at 20 s) wait in FQ with the same Pt.
// gpusched serves X1 first (first submission); fairshare serves y, which used nothing, first.
// The other waiter starts at the release at 3700 s (issue 37: not at the next t2, 3720 s).
TEST(PoliciesTest, FairShareServesTheVirtualClusterThatUsedLessFirst) {
  const SimResult g = Simulate("tiny_vcs.csv", TraceFormat::kCsv, "1x1", With(Policy::kGpusched));
  EXPECT_EQ(Jcts(g), (std::map<std::string, double>{{"X0", 3600}, {"X1", 3690}, {"Y0", 3780}}));
  const SimResult f = Simulate("tiny_vcs.csv", TraceFormat::kCsv, "1x1", With(Policy::kFairShare));
  EXPECT_EQ(Jcts(f), (std::map<std::string, double>{{"X0", 3600}, {"X1", 3790}, {"Y0", 3680}}));
  const auto teams = SummarizeByTeam(f.jobs);
  ASSERT_EQ(teams.size(), 2u);
  EXPECT_EQ(teams[0].team, "x");
  EXPECT_DOUBLE_EQ(teams[0].avg_jct_s, (3600 + 3790) / 2.0);
  EXPECT_DOUBLE_EQ(teams[1].avg_wait_s, 3580);
}

// Quotas in the simulator: a (guarantee 2) reclaims the two GPUs b borrows at 100 s; b's jobs
// are suspended (attained 100 s kept) and finish at 200 + 900 s. Without quotas A0 waits for
// them and starts at their release, 1000 s.
TEST(PoliciesTest, QuotaOwnerReclaimsBorrowedGpus) {
  SimOptions o = With(Policy::kGpusched);
  o.quotas = {{"a", 2, 0, 0, ""}, {"b", 0, 0, 2, ""}};
  const SimResult q = Simulate("tiny_reclaim.csv", TraceFormat::kCsv, "1x2", o);
  EXPECT_EQ(Jcts(q), (std::map<std::string, double>{{"A0", 100}, {"B0", 1100}, {"B1", 1100}}));
  EXPECT_EQ(q.stats.reclaims, 2);
  const SimResult plain =
      Simulate("tiny_reclaim.csv", TraceFormat::kCsv, "1x2", With(Policy::kGpusched));
  EXPECT_EQ(Jcts(plain), (std::map<std::string, double>{{"A0", 1000}, {"B0", 1000}, {"B1", 1000}}));
}

TEST(PoliciesTest, FairShareIsAPolicyName) {
  EXPECT_EQ(*ParsePolicy("fairshare"), Policy::kFairShare);
  EXPECT_NE(ParsePolicy("fair").status().message().find("fairshare"), std::string::npos);
}


// Gangs (README.md, "Gangs, reservations and preemption"), on 2x8 with fifo-backfill: A 8
// GPUs at 0 s for 100 s; G 16 GPUs at 10 s for 50 s runs as 2 x 8 and reserves both nodes
// for 100 s; S1 (4 GPUs, 500 s) would end after that and waits; S2 (4 GPUs, 50 s) ends at
// 80 s and backfills. G runs 100-150 s, S1 150-650 s.
TEST(PoliciesTest, GangReservesNodesWhileShortJobsBackfill) {
  const SimResult r = Simulate("tiny_gang.csv", TraceFormat::kCsv, "2x8",
                               With(Policy::kFifoBackfill));
  EXPECT_EQ(Jcts(r), (JctMap{{"A", 100}, {"G", 140}, {"S1", 630}, {"S2", 50}}));
  EXPECT_EQ(r.summary.rejected, 0);
  EXPECT_EQ(r.stats.gangs_placed, 1);
}

TEST(PoliciesTest, WithoutGangsAWideJobIsRejected) {
  SimOptions o = With(Policy::kFifoBackfill);
  o.gangs = false;
  const SimResult r = Simulate("tiny_gang.csv", TraceFormat::kCsv, "2x8", o);
  EXPECT_EQ(r.summary.rejected, 1);
  EXPECT_EQ(r.jobs[1].outcome, JobOutcome::kRejected);
}

// 16 GPUs on 8-GPU nodes: 2 x 8; 12: 2 x 6; 20: 3 x 7 (CPU and RAM split alike).
TEST(PoliciesTest, WideJobsSplitIntoTheFewestNodes) {
  TraceJob j;
  j.num_gpu = 16;
  j.gpu_milli = 1000;
  j.cpu_milli = 9000;
  core::TaskSpec s = MakeTaskSpec(j, 16'000, 8);
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.gpus, 8);
  EXPECT_EQ(s.resources.cpu_milli, 4500);
  j.num_gpu = 12;
  s = MakeTaskSpec(j, 16'000, 8);
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.gpus, 6);
  j.num_gpu = 20;
  s = MakeTaskSpec(j, 16'000, 8);
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.gpus, 7);
  j.num_gpu = 8;
  s = MakeTaskSpec(j, 16'000, 8);
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.gpus, 8);
}

// --priority lo=low --priority hi=high on 1x8: H0 (high) preempts L0 at 10 s and runs
// 10-30 s; L0 resumes with its 10 s kept and ends at 120 s.
TEST(PoliciesTest, HighPriorityJobPreemptsALowOne) {
  SimOptions o = With(Policy::kFifoBackfill);
  o.vc_priority = {{"lo", "low"}, {"hi", "high"}};
  const SimResult r = Simulate("tiny_priority.csv", TraceFormat::kCsv, "1x8", o);
  EXPECT_EQ(Jcts(r), (JctMap{{"L0", 120}, {"H0", 20}}));
  EXPECT_EQ(r.summary.preemptions, 1);
  EXPECT_EQ(r.stats.priority_preemptions, 1);
}

TEST(PoliciesTest, VcPriorityNamesTheFlagTheValueAndTheKnownClasses) {
  const auto classes = core::SchedulerConfig().priority_classes;
  auto ok = ParseVcPriority("6214e9=high", classes);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->first, "6214e9");
  EXPECT_EQ(ok->second, "high");
  for (const char* bad : {"6214e9", "=high", "6214e9=", ""}) {
    auto r = ParseVcPriority(bad, classes);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), "--priority: expected VC=CLASS, got \"" + std::string(bad) + "\"");
  }
  auto unknown = ParseVcPriority("vc=urgent", classes);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "--priority: unknown class \"urgent\" in \"vc=urgent\" (use one of high, normal, low)");
}

}  // namespace
}  // namespace gpusched::sim
