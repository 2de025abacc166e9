#include "sim/cluster_spec.h"

#include <gtest/gtest.h>

namespace gpusched::sim {
namespace {

TEST(ClusterSpecTest, UniformNodes) {
  auto nodes = ParseClusterSpec("100x8");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 100u);
  EXPECT_EQ((*nodes)[7].name, "node-0007");
  EXPECT_EQ((*nodes)[7].gpus.size(), 8u);
  EXPECT_EQ((*nodes)[7].gpus[0].total_mib, 32 * 1024);
  EXPECT_EQ((*nodes)[7].capacity.cpu_milli, 96'000);
  const ClusterTotals t = Totals(*nodes);
  EXPECT_EQ(t.gpus, 800);
  EXPECT_EQ(t.gpu_mib, 800 * 32 * 1024);
}

TEST(ClusterSpecTest, GpuMemory) {
  auto nodes = ParseClusterSpec("1x64x80GiB");
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[0].gpus.size(), 64u);
  EXPECT_EQ((*nodes)[0].gpus[0].total_mib, 80 * 1024);
}

TEST(ClusterSpecTest, BadSpecsAreNamed) {
  EXPECT_EQ(ParseClusterSpec("100").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseClusterSpec("0x8").status().message(),
            "cluster: \"0x8\" has N \"0\", not a whole number of nodes from 1 to 1000000 "
            "(expected NxG[xMEM], e.g. 100x8 or 1x64x80GiB)");
  EXPECT_NE(ParseClusterSpec("1.5x8").status().message().find("has N \"1.5\""),
            std::string::npos);
  EXPECT_NE(ParseClusterSpec("1x8,2x4").status().message().find("has G \"8,2\""),
            std::string::npos);
  EXPECT_FALSE(ParseClusterSpec("2x8x12XB").ok());
  for (const char* bad : {"2x", "x4", "2x8x", "1x2x3x4"}) {
    EXPECT_EQ(ParseClusterSpec(bad).status().message(),
              "cluster: \"" + std::string(bad) + "\" is not NxG[xMEM], e.g. 100x8 or 1x64x80GiB");
  }
  EXPECT_NE(ParseClusterSpec("99999999999999999999x8").status().message().find("has N \""),
            std::string::npos);  // overflow is out of range, not a wrap-around
  EXPECT_NE(ParseClusterSpec("1x-1").status().message().find("has G \"-1\", not a whole number "
                                                             "of GPUs from 0 to 1024"),
            std::string::npos);
}

TEST(ClusterSpecTest, NodeList) {
  auto nodes = LoadNodeList(std::string(GPUSCHED_SIM_TESTDATA) + "/alibaba_nodes_sample.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "n0");
  EXPECT_EQ((*nodes)[0].gpus.size(), 2u);
  EXPECT_EQ((*nodes)[0].gpus[0].model, "T4");
  EXPECT_EQ((*nodes)[0].gpus[0].total_mib, kDefaultListGpuMib);
  EXPECT_EQ((*nodes)[1].capacity.mem_mib, 65'536);
}

}  // namespace
}  // namespace gpusched::sim
