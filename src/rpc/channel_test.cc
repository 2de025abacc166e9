#include "rpc/channel.h"

#include <gtest/gtest.h>

namespace gpusched::rpc {
namespace {

TEST(ChannelTargetTest, AnIpv4LiteralSkipsTheResolver) {
  EXPECT_EQ(ChannelTarget("127.0.0.1:7070"), "ipv4:127.0.0.1:7070");
  EXPECT_EQ(ChannelTarget("10.1.2.3:1"), "ipv4:10.1.2.3:1");
}

TEST(ChannelTargetTest, EverythingElseIsPassedThrough) {
  for (const char* a : {"localhost:7070", "gpu-1.example.com:7070", "[::1]:7070",
                        "dns:///127.0.0.1:7070", "127.0.0.1", "127.0.0.1:", ":7070",
                        "127.0.0.1:70x", "1.2.3:7070", "unix:/tmp/s"}) {
    EXPECT_EQ(ChannelTarget(a), a) << a;
  }
  // A NUL inside the host (found by the tls_names fuzz target): not an IPv4 literal.
  const std::string nul("127.0.0.1\0x:7070", 16);
  EXPECT_EQ(ChannelTarget(nul), nul);
}

}  // namespace
}  // namespace gpusched::rpc
