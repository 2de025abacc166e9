// nodeCache mode: the informers follow a fake API server's watch, and stay correct after a
// dropped watch, an expired version (410) and failing lists.

#include "extender/kube_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "extender/extender.h"
#include "extender/testing/fake_kube_api.h"
#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using namespace testing;  // builders and kGiB of testing/fixtures.h

// Waits for a condition the informer threads bring about. Not a timing assumption: the
// bound only turns a hang into a failure.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 20'000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

class KubeSyncTest : public ::testing::Test {
 protected:
  void Start() {
    SyncOptions options;
    options.backoff_initial_ms = 0;  // relist at once: the fake clock does not run by itself
    options.backoff_max_ms = 0;
    sync_ = std::make_unique<KubeSync>(api_, cache_, clock_, options);
    sync_->Start();
    ASSERT_TRUE(Eventually([&] { return cache_.synced(); }));
    // The informers open their watches after the lists that sync the cache: a test that
    // drops or expires watches must find both open, or an informer whose watch was not yet
    // open would never see the drop (and never relist).
    ASSERT_TRUE(Eventually([&] { return api_.open_watches() == 2; }));
  }
  // Free MiB of a node's GPU as the cache sees it; -1 for an unknown node.
  MiB Free(const std::string& node, int gpu) {
    return cache_.Read([&](const GpuCluster& c) -> MiB {
      auto i = c.Index(node);
      return i ? c.state().node(*i).gpus[static_cast<size_t>(gpu)].accounted_free() : -1;
    });
  }
  std::string Filter(const KubePod& pod, const std::string& node) {
    const std::string body = "{\"Pod\":" + testing::PodJson(pod) + ",\"NodeNames\":[\"" + node + "\"]}";
    return extender_.HandleRequest("filter", body);
  }

  FakeClock clock_{0, /*auto_advance_on_sleep=*/true};
  testing::FakeKubeApi api_{clock_};
  KubeCache cache_{ModelOptions{}, clock_};
  Extender extender_{ExtenderConfig{}, clock_, &cache_, &api_};
  std::unique_ptr<KubeSync> sync_;
};

TEST_F(KubeSyncTest, NodeCacheFollowsTheWatch) {
  api_.PutNode(MakeNode("n1", 1, 16 * kGiB));
  Start();
  EXPECT_EQ(Free("n1", 0), 16 * kGiB);
  api_.PutPod(BoundPod(MakePod("a", 0, 10 * kGiB), "n1", {0}));
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 6 * kGiB; }));
  EXPECT_NE(Filter(MakePod("p", 0, 8 * kGiB), "n1").find("no GPU has 8GiB free"),
            std::string::npos);
  api_.PutNode(MakeNode("n2", 2, 16 * kGiB));
  ASSERT_TRUE(Eventually([&] { return Free("n2", 1) == 16 * kGiB; }));
  api_.DeletePod("uid-default-a");
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 16 * kGiB; }));
  api_.DeleteNode("n2");
  ASSERT_TRUE(Eventually([&] { return Free("n2", 0) == -1; }));
  EXPECT_EQ(api_.list_calls(), 2);  // one list per informer: nothing was relisted
}

TEST_F(KubeSyncTest, StaysCorrectAfterADroppedWatch) {
  api_.PutNode(MakeNode("n1", 1, 16 * kGiB));
  Start();
  const int lists = api_.list_calls();
  // The stream breaks, and the next list fails too; changes keep happening meanwhile.
  api_.FailLists(1, Unavailable("connection refused"));
  api_.DropWatches(Unavailable("connection reset by peer"));
  api_.PutPod(BoundPod(MakePod("a", 0, 12 * kGiB), "n1", {0}));
  api_.PutNode(MakeNode("n2", 1, 16 * kGiB));
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 4 * kGiB && Free("n2", 0) == 16 * kGiB; }));
  // The failed list, then both informers again. Waited for, like the state above: the fake
  // may deliver the changes on the old watches before it reports them dropped.
  EXPECT_TRUE(Eventually([&] { return api_.list_calls() >= lists + 3; })) << api_.list_calls();
  EXPECT_TRUE(Eventually([&] {
    return sync_->stats().node_watch_failures + sync_->stats().pod_watch_failures >= 2;
  }));
  // And it keeps following the watch afterwards.
  ASSERT_TRUE(Eventually([&] { return api_.open_watches() == 2; }));
  api_.DeletePod("uid-default-a");
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 16 * kGiB; }));
}

TEST_F(KubeSyncTest, AnExpiredVersionLeadsToAFreshList) {
  api_.PutNode(MakeNode("n1", 1, 16 * kGiB));
  Start();
  api_.PutPod(BoundPod(MakePod("a", 0, 8 * kGiB), "n1", {0}));
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 8 * kGiB; }));
  api_.ExpireHistory();  // 410 Gone: resuming the watch is impossible
  api_.DeletePod("uid-default-a");
  ASSERT_TRUE(Eventually([&] { return Free("n1", 0) == 16 * kGiB; }));
  // The delete may arrive on the old watch before it reports 410 (the fake delivers what it
  // has, then the drop), so the fresh list can come after it: wait for it, not assume it.
  ASSERT_TRUE(Eventually([&] { return sync_->stats().pod_lists >= 2; }));
  EXPECT_EQ(Free("n1", 0), 16 * kGiB);  // and the fresh list agrees
}

TEST_F(KubeSyncTest, AssumedBindIsKeptUntilTheWatchShowsThePodBound) {
  api_.PutNode(MakeNode("n1", 1, 16 * kGiB));
  const KubePod pod = MakePod("p", 0, 10 * kGiB);
  api_.PutPod(pod);
  Start();
  const std::string bind = R"({"PodName":"p","PodNamespace":"default","PodUID":")" + pod.uid +
                           R"(","Node":"n1"})";
  EXPECT_EQ(extender_.HandleRequest("bind", bind), R"({"Error":""})");
  EXPECT_EQ(Free("n1", 0), 6 * kGiB);  // at once, before any event
  ASSERT_TRUE(Eventually([&] { return cache_.stats().assumed == 0; }));  // the watch confirmed
  EXPECT_EQ(Free("n1", 0), 6 * kGiB);
}

TEST(KubeCacheTest, AnUnconfirmedAssumptionExpires) {
  FakeClock clock;
  KubeCache cache(ModelOptions{}, clock, /*assume_ttl_ms=*/1000);
  cache.ReplaceNodes({MakeNode("n1", 1, 16 * kGiB)});
  cache.ReplacePods({});
  PodClaim claim = ClaimOf(BoundPod(MakePod("p", 0, 4 * kGiB), "n1"), ModelOptions{});
  claim.annotated_gpus = {0};
  cache.Assume(claim);
  const KubePod pending = MakePod("p", 0, 4 * kGiB);  // the watch still shows it unbound
  cache.ApplyPod(WatchEventType::kModified, pending);
  EXPECT_EQ(cache.stats().assumed, 1);
  clock.AdvanceMs(1000);
  cache.ApplyPod(WatchEventType::kModified, pending);
  EXPECT_EQ(cache.stats().assumed, 0);
  EXPECT_EQ(cache.Read([](const GpuCluster& c) { return c.pod_count(); }), 0u);
}

}  // namespace
}  // namespace gpusched::extender
