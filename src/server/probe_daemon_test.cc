// CN115981827A claim 9: the probe itself, against a port that listens and one that is silent,
// and the concurrency of a round (a silent node delays no other probe past the timeout).
// The probe's timeout is the kernel's (real time), so these tests measure real time.

#include "server/probe_daemon.h"

#include <gtest/gtest.h>

#include <chrono>

#include "server/testing/tcp_peers.h"

namespace gpusched::server {
namespace {

using testing::ListeningPeer;
using testing::SilentPeer;

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

TEST(ProbeDaemonTest, CN115981827A_Claim9_ListeningPortIsReachableAndASilentPortTimesOut) {
  ListeningPeer listening;
  SilentPeer silent;
  ASSERT_FALSE(listening.address().empty());
  ASSERT_FALSE(silent.address().empty()) << "could not fill the silent port's backlog";

  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ProbeTcp(listening.address(), 2'000));
  EXPECT_LT(ElapsedMs(start), 1'000) << "a listening port answers at once";

  start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ProbeTcp(silent.address(), 300));
  const int64_t waited = ElapsedMs(start);
  EXPECT_GE(waited, 290) << "the silent port must be waited for, not refused";
  EXPECT_LT(waited, 2'000) << "the probe must give up at its timeout";

  EXPECT_FALSE(ProbeTcp("127.0.0.1:1", 300));  // refused
  EXPECT_FALSE(ProbeTcp("no-port", 300));
}

// Four silent nodes among four listening ones, timeout 400 ms: one after the other the round
// would take 1.6 s; concurrently it takes one timeout, and every answer is right.
TEST(ProbeDaemonTest, CN115981827A_Claim9_ProbesRunConcurrentlySoASilentNodeDelaysNoOther) {
  ListeningPeer listening;
  SilentPeer silent;
  ASSERT_FALSE(silent.address().empty()) << "could not fill the silent port's backlog";
  std::vector<std::string> addresses;
  std::vector<bool> expected;
  for (int i = 0; i < 4; ++i) {
    addresses.push_back(silent.address());
    expected.push_back(false);
    addresses.push_back(listening.address());
    expected.push_back(true);
  }
  ThreadPool pool(ProbeDaemon::kProbeWorkers);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ProbeConcurrently(addresses, 400, pool), expected);
  const int64_t took = ElapsedMs(start);
  EXPECT_GE(took, 390);
  EXPECT_LT(took, 800) << "the silent probes ran one after the other";
}

}  // namespace
}  // namespace gpusched::server
