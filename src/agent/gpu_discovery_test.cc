#include "agent/gpu_discovery.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpusched::agent
