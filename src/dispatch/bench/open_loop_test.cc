// The load generator's accounting: only served requests have a latency; a request the policy
// gave up on or the generator dropped is counted as such.
#include "dispatch/bench/open_loop.h"

#include <gtest/gtest.h>

#include <atomic>

namespace gpusched::dispatch {
namespace {

TEST(OpenLoopTest, LatencyPercentilesCoverServedRequestsOnly) {
  std::vector<RequestRecord> records;
  for (int i = 1; i <= 10; ++i) records.push_back({RequestOutcome::kServed, double(i)});
  records.push_back({RequestOutcome::kGivenUp, 500});  // waited, then refused
  records.push_back({RequestOutcome::kDropped, 0.01});  // never ran
  records.push_back({RequestOutcome::kDropped, 0});
  const OpenLoopResult r = Summarize("p", 0.8, records, 2.0);
  EXPECT_EQ(r.served, 10);
  EXPECT_EQ(r.given_up, 1);
  EXPECT_EQ(r.dropped, 2);
  EXPECT_EQ(r.p50_ms, 5);
  EXPECT_EQ(r.p99_ms, 10);
  EXPECT_EQ(r.p999_ms, 10);
  EXPECT_DOUBLE_EQ(r.mean_ms, 5.5);
  EXPECT_DOUBLE_EQ(r.throughput_per_s, 5);
}

TEST(OpenLoopTest, NothingServedGivesNoLatency) {
  const OpenLoopResult r =
      Summarize("p", 0.5, {{RequestOutcome::kGivenUp, 3}, {RequestOutcome::kDropped, 0}}, 0);
  EXPECT_EQ(r.served, 0);
  EXPECT_EQ(r.given_up, 1);
  EXPECT_EQ(r.dropped, 1);
  EXPECT_EQ(r.p50_ms, 0);
  EXPECT_EQ(r.throughput_per_s, 0);
}

TEST(OpenLoopTest, AcquireTimeoutIsAGiveUpAnyOtherErrorADrop) {
  EXPECT_EQ(OutcomeOfAcquireError(Unavailable("acquire_timeout")), RequestOutcome::kGivenUp);
  EXPECT_EQ(OutcomeOfAcquireError(FailedPrecondition("shutting down")), RequestOutcome::kDropped);
  EXPECT_EQ(OutcomeOfAcquireError(InvalidArgument("service")), RequestOutcome::kDropped);
}

// Grants GPU 0 to service 0 and refuses service 1 as an acquire timeout would.
class RefusesServiceOne final : public DispatchPolicy {
 public:
  std::string_view name() const override { return "refuses-one"; }
  int gpu_count() const override { return 1; }
  StatusOr<int> ServiceIndex(std::string_view) const override { return 0; }
  StatusOr<Lease> Acquire(int service) override {
    if (service == 1) return Unavailable("acquire: timed out");
    Lease l;
    l.gpu = 0;
    l.service = service;
    l.ticket = ++tickets_;
    return l;
  }
  void Complete(const Lease&) override { ++completed; }
  std::atomic<int> completed{0};

 private:
  std::atomic<uint64_t> tickets_{0};
};

// Real time, short work: the counts depend only on the seeded service mix.
TEST(OpenLoopTest, ARefusedRequestIsNotCountedAsServed) {
  OpenLoopConfig c;
  c.gpus = 1;
  c.load = 0.3;
  c.requests = 200;
  c.streams_per_gpu = 8;
  c.worker_threads = 8;
  c.services = {{"ok", 0.2, 0.1, 0.5}, {"refused", 0.2, 0.1, 0.5}};
  RealClock clock;
  auto owned = MakeBenchDevices(c.gpus, c.streams_per_gpu, clock);
  RefusesServiceOne policy;
  Rng rng(7);
  const OpenLoopResult r = RunOpenLoop(policy, {owned[0].get()}, c, clock, rng);
  EXPECT_EQ(r.served + r.given_up, 200);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(r.served, policy.completed.load());
  EXPECT_GT(r.given_up, 50);
  EXPECT_GT(r.served, 50);
  EXPECT_GT(r.p50_ms, 0.1);  // every served request computed ~0.2 ms
}

}  // namespace
}  // namespace gpusched::dispatch
