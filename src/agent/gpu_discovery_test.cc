#include "agent/gpu_discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace gpusched::agent {
namespace {

TEST(GpuDiscoveryTest, ParsesSimulatedGpuLists) {
  auto g = ParseGpuList("8x80GiB");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->size(), 8u);
  EXPECT_EQ((*g)[7].total_mib, 80 * 1024);
  EXPECT_EQ(ParseGpuList("2x16384")->at(1).total_mib, 16384);
  EXPECT_TRUE(ParseGpuList("0")->empty());
  auto sim = MakeSimulatedGpus(*g);
  EXPECT_TRUE(sim->simulated());
  EXPECT_EQ(sim->FreeMib(), std::vector<MiB>(8, -1));
}

TEST(GpuDiscoveryTest, BadListsNameTheFlag) {
  for (const char* bad : {"", "x80GiB", "8", "8x", "0x80GiB", "99x1GiB", "8x12XB", "ax1GiB"}) {
    auto g = ParseGpuList(bad);
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(g.status().message().find("gpus"), std::string::npos) << bad;
  }
}

// NVML through the test-only fake libnvidia-ml.so.1 (testing/fake_nvml.c), which answers
// from FAKE_NVML_* variables.
class NvmlTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"FAKE_NVML_GPUS", "FAKE_NVML_USED", "FAKE_NVML_PROCS", "FAKE_NVML_LOST",
                          "FAKE_NVML_EVENTS", "FAKE_NVML_NUMA", "FAKE_NVML_NVLINK",
                          "FAKE_NVML_UTIL"}) {
      unsetenv(v);
    }
  }
};

TEST_F(NvmlTest, DiscoversModelsTotalsAndFreeMemory) {
  setenv("FAKE_NVML_GPUS", "H200:143771,H200:143771", 1);
  setenv("FAKE_NVML_USED", "1:1024", 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_FALSE((*nvml)->simulated());
  ASSERT_EQ((*nvml)->gpus().size(), 2u);
  EXPECT_EQ((*nvml)->gpus()[1].model, "H200");
  EXPECT_EQ((*nvml)->gpus()[1].total_mib, 143771);
  EXPECT_EQ((*nvml)->FreeMib(), (std::vector<MiB>{143771, 143771 - 1024}));
}

TEST_F(NvmlTest, ALostGpuFailsItsHealthCheck) {
  setenv("FAKE_NVML_GPUS", "A:16384,B:16384", 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  EXPECT_EQ((*nvml)->CheckHealth(), (std::vector<bool>{true, true}));
  setenv("FAKE_NVML_LOST", "1", 1);
  EXPECT_EQ((*nvml)->CheckHealth(), (std::vector<bool>{true, false}));
  EXPECT_EQ((*nvml)->FreeMib()[1], -1);
}

TEST_F(NvmlTest, PerProcessMemoryFeedsTheWatchdog) {
  setenv("FAKE_NVML_GPUS", "A:16384,B:16384", 1);
  // 20 processes on GPU 0: more than the first call's room, so the second call is tested.
  std::string procs = "4243:1:100";
  for (int pid = 5000; pid < 5020; ++pid) procs += "," + std::to_string(pid) + ":0:10";
  setenv("FAKE_NVML_PROCS", procs.c_str(), 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  const std::vector<GpuProcessMemory> seen = (*nvml)->ProcessMemory();
  ASSERT_EQ(seen.size(), 21u);
  EXPECT_EQ(seen[0].gpu, 0);
  EXPECT_EQ(seen[0].pid, 5000);
  EXPECT_EQ(seen[20].gpu, 1);
  EXPECT_EQ(seen[20].pid, 4243);
  EXPECT_EQ(seen[20].used_mib, 100);
}

// Idle allocations: per-process utilisation, the busiest sample per process and GPU; a GPU
// no process used (NVML_ERROR_NOT_FOUND) adds nothing, and 70 samples on one GPU take the
// second call with room enough.
TEST_F(NvmlTest, CN109992422A_Claim7_PerProcessUtilisationForTaskHeartbeats) {
  setenv("FAKE_NVML_GPUS", "A:16384,B:16384,C:16384", 1);
  std::string util = "4242:0:35,4242:0:80,4243:1:0";
  for (int i = 0; i < 70; ++i) util += ",5000:1:" + std::to_string(i);
  setenv("FAKE_NVML_UTIL", util.c_str(), 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  const auto seen = (*nvml)->ProcessUtilization();
  ASSERT_TRUE(seen.has_value());
  ASSERT_EQ(seen->size(), 3u);
  EXPECT_EQ((*seen)[0].gpu, 0);
  EXPECT_EQ((*seen)[0].pid, 4242);
  EXPECT_EQ((*seen)[0].sm_util, 80);
  EXPECT_EQ((*seen)[1].gpu, 1);
  EXPECT_EQ((*seen)[1].pid, 4243);
  EXPECT_EQ((*seen)[1].sm_util, 0);
  EXPECT_EQ((*seen)[2].pid, 5000);
  EXPECT_EQ((*seen)[2].sm_util, 69);
  unsetenv("FAKE_NVML_UTIL");  // no process used any GPU since: known, and empty
  const auto none = (*nvml)->ProcessUtilization();
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  setenv("FAKE_NVML_LOST", "2", 1);  // the driver fails: unknown, not 0 %
  EXPECT_FALSE((*nvml)->ProcessUtilization().has_value());
}

TEST(GpuDiscoveryTest, SimulatedGpusDoNotMeasureUtilisation) {
  auto gpus = ParseGpuList("1x16GiB");
  ASSERT_TRUE(gpus.ok());
  EXPECT_FALSE(MakeSimulatedGpus(*gpus)->ProcessUtilization().has_value());
}

TEST_F(NvmlTest, NoLibraryIsNotFound) {
  EXPECT_EQ(OpenNvml("libgpusched-no-such-nvml.so.1").status().code(), StatusCode::kNotFound);
}

// Xid 79 (fell off the bus) and a double-bit ECC error are faults; Xid 13 (an application's
// illegal instruction) is the application's, not the GPU's.
TEST_F(NvmlTest, XidAndEccEventsAreFaultsApplicationXidsAreNot) {
  setenv("FAKE_NVML_GPUS", "A:16384,B:16384", 1);
  setenv("FAKE_NVML_EVENTS", "0:xid:79,1:xid:13,1:ecc", 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  const std::vector<core::GpuFault> faults = (*nvml)->PollFaults();
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].gpu, 0);
  EXPECT_EQ(faults[0].error, "Xid 79");
  EXPECT_EQ(faults[1].gpu, 1);
  EXPECT_EQ(faults[1].error, "ECC uncorrectable errors: 1");
  EXPECT_TRUE((*nvml)->PollFaults().empty());  // each delivered once
}

TEST_F(NvmlTest, NvLinkPairsAndNumaNodesAreReported) {
  setenv("FAKE_NVML_GPUS", "A:16384,A:16384,A:16384,A:16384", 1);
  setenv("FAKE_NVML_NUMA", "0,0,1,1", 1);
  setenv("FAKE_NVML_NVLINK", "0-1,2-3", 1);
  auto nvml = OpenNvml(GPUSCHED_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  const core::GpuTopology t = (*nvml)->Topology();
  ASSERT_EQ(t.gpus, 4);
  EXPECT_TRUE(core::ValidateTopology(t).ok());
  EXPECT_EQ(t.link(0, 1), core::GpuLink::kNvLink);
  EXPECT_EQ(t.link(3, 2), core::GpuLink::kNvLink);
  EXPECT_EQ(t.link(0, 2), core::GpuLink::kCrossSocket);
  EXPECT_EQ(t.link(1, 0), core::GpuLink::kNvLink);
  EXPECT_EQ(t.numa, (std::vector<int>{0, 0, 1, 1}));
}

}  // namespace
}  // namespace gpusched::agent
