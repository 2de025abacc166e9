// GpuschedPolicy on the fake clock: earliest expected finish under processor sharing, ties by
// GPU index, cost learned from received work, waits that end on a release.
#include "dispatch/gpusched_policy.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dispatch/realtime_test_util.h"

namespace gpusched::dispatch {
namespace {

GpuschedConfig SmallAndBig(int gpus) {
  GpuschedConfig c;
  c.gpu_count = gpus;
  c.services = {{.name = "small", .cost_time = 10}, {.name = "big", .cost_time = 100}};
  return c;
}

std::unique_ptr<GpuschedPolicy> MakePolicy(GpuschedConfig c, Clock& clock) {
  auto p = GpuschedPolicy::Create(std::move(c), clock);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

void WaitForSleepers(const FakeClock& clock, int n) {
  while (clock.sleepers() < n) std::this_thread::yield();
}

TEST(GpuschedPolicyTest, TiesGoToTheLowestGpuIndex) {
  FakeClock clock;
  auto p = MakePolicy(SmallAndBig(3), clock);
  std::vector<int> gpus;
  for (int i = 0; i < 5; ++i) gpus.push_back(p->Acquire(0)->gpu);
  // Idle GPUs tie at 0, then three GPUs with one equal co-runner each tie again.
  EXPECT_EQ(gpus, (std::vector<int>{0, 1, 2, 0, 1}));
}

// GPU0 runs one big request that has most of its work left; GPU1 runs two small ones nearly
// done. A new big request finishes first beside the two small ones, though GPU1 has more
// co-runners (join-shortest-queue would pick GPU0).
TEST(GpuschedPolicyTest, PicksTheEarliestExpectedFinishNotTheShortestQueue) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.prior_spread = 0;  // run times as expected: the small ones have 4 ms left
  auto p = MakePolicy(c, clock);
  ASSERT_TRUE(p->SetGpuEnabled(1, false).ok());
  ASSERT_EQ(p->Acquire(1)->gpu, 0);
  ASSERT_TRUE(p->SetGpuEnabled(1, true).ok());
  ASSERT_TRUE(p->SetGpuEnabled(0, false).ok());
  ASSERT_EQ(p->Acquire(0)->gpu, 1);
  ASSERT_EQ(p->Acquire(0)->gpu, 1);
  ASSERT_TRUE(p->SetGpuEnabled(0, true).ok());
  clock.AdvanceMs(12);  // big: 12 of 100 done; each small: 6 of 10 (they share GPU1)
  EXPECT_EQ(p->load(0).co_runners, 1);
  EXPECT_EQ(p->load(1).co_runners, 2);
  EXPECT_EQ(p->Acquire(1)->gpu, 1);
  EXPECT_EQ(p->load(1).co_runners, 3);
}

TEST(GpuschedPolicyTest, TracksEachCoRunnersExpectedFinishUnderSharing) {
  FakeClock clock;
  GpuschedConfig c;
  c.services = {{.name = "a", .cost_time = 10}, {.name = "b", .cost_time = 30}};
  c.prior_spread = 0;  // trust cost_time exactly
  auto p = MakePolicy(c, clock);
  const Lease a = *p->Acquire(0);
  const Lease b = *p->Acquire(1);
  // Sharing one GPU: a's 10 ms take 20, then b runs alone for its last 20: done at 40.
  GpuLoad load = p->load(0);
  EXPECT_EQ(load.co_runners, 2);
  EXPECT_EQ(load.expected_finish, (std::vector<TimeMs>{20, 40}));
  EXPECT_EQ(load.mark.fin_time, 40);
  EXPECT_EQ(load.mark.owner, b.ticket);
  clock.AdvanceMs(10);  // the estimate does not move while the leases run as expected
  EXPECT_EQ(p->load(0).expected_finish, (std::vector<TimeMs>{20, 40}));
  clock.AdvanceMs(6);   // a ends early, at 16 (8 ms of work): b has 22 left, alone
  ASSERT_TRUE(p->Release(a, Outcome::kSucceeded).ok());
  load = p->load(0);
  EXPECT_EQ(load.co_runners, 1);
  EXPECT_EQ(load.expected_finish, (std::vector<TimeMs>{38}));
  EXPECT_EQ(load.mark.owner, b.ticket);
  EXPECT_DOUBLE_EQ(p->cost_time_ms(0), 8);
}

TEST(GpuschedPolicyTest, LearnsCostFromReceivedWorkNotWallTime) {
  FakeClock clock;
  auto p = MakePolicy(SmallAndBig(1), clock);
  const Lease x = *p->Acquire(0), y = *p->Acquire(0);
  clock.AdvanceMs(40);  // 40 ms of wall time each, on a GPU shared by two: 20 ms of work
  ASSERT_TRUE(p->Release(x, Outcome::kSucceeded).ok());
  ASSERT_TRUE(p->Release(y, Outcome::kFailed).ok());  // a failure does not train the cost
  EXPECT_DOUBLE_EQ(p->cost_time_ms(0), 20);
  EXPECT_EQ(p->outstanding(), 0);
}

// Claim 2's dispatcher, on one GPU busy with a 90 ms task that ends at t = 5, makes a 100 ms
// request give up and retry every try_time: it starts at t = 10 and the GPU idles 5 ms. The
// gpusched policy runs it beside the busy task at once.
TEST(GpuschedPolicyTest, GrantsAtOnceWhereTheLiteralPolicyWaits) {
  FakeClock clock;
  DispatcherConfig literal_config = OneService(1);  // ocr: cost 100, wait 50, try 10
  literal_config.services.push_back({.name = "warm", .cost_time = 90, .wait_time = 0,
                                     .try_time = 10});
  auto literal = Make(literal_config, clock);
  GpuschedConfig ours_config;
  ours_config.services = literal_config.services;
  auto ours = MakePolicy(ours_config, clock);

  const Lease literal_warm = *literal->TryAcquire(1, 0);
  const Lease ours_warm = *ours->Acquire(1);
  StatusOr<Lease> literal_lease = Unavailable("not yet");
  std::thread request([&] { literal_lease = literal->Acquire(0); });
  const StatusOr<Lease> ours_lease = ours->Acquire(0);
  WaitForSleepers(clock, 1);  // the literal request gave up at t = 0
  clock.AdvanceMs(5);
  ASSERT_TRUE(literal->Release(literal_warm, Outcome::kSucceeded).ok());
  ASSERT_TRUE(ours->Release(ours_warm, Outcome::kSucceeded).ok());
  clock.AdvanceMs(5);
  request.join();

  ASSERT_TRUE(ours_lease.ok());
  EXPECT_EQ(ours_lease->granted_ns, 0);
  EXPECT_EQ(ours_lease->attempts, 1);
  ASSERT_TRUE(literal_lease.ok()) << literal_lease.status().ToString();
  EXPECT_EQ(literal_lease->granted_ns, 10'000'000);
  EXPECT_EQ(literal_lease->attempts, 2);
}

TEST(GpuschedPolicyTest, BlockedAcquireWakesOnReleaseNotOnATimer) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(1);
  c.max_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  const Lease first = *p->Acquire(1);
  StatusOr<Lease> second = Unavailable("not yet");
  std::thread waiter([&] { second = p->Acquire(0); });
  WaitForSleepers(clock, 1);
  clock.AdvanceMs(3);  // the waiter re-checks and sleeps on: the GPU is still at its cap
  WaitForSleepers(clock, 1);
  ASSERT_TRUE(p->Release(first, Outcome::kSucceeded).ok());
  waiter.join();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->granted_ns, 3'000'000);  // at the release, no timer ran out
  EXPECT_EQ(second->requested_ns, 0);
  EXPECT_EQ(second->attempts, 2);
}

TEST(GpuschedPolicyTest, AcquireTimeoutGivesUpWithUnavailable) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.max_per_gpu = 1;
  c.acquire_timeout = 20;
  auto p = MakePolicy(c, clock);
  ASSERT_TRUE(p->Acquire(1).ok());
  ASSERT_TRUE(p->SetGpuEnabled(1, false).ok());
  StatusOr<Lease> late = Unavailable("not yet");
  std::thread waiter([&] { late = p->Acquire(0); });
  WaitForSleepers(clock, 1);
  clock.AdvanceMs(20);
  waiter.join();
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("acquire_timeout 20 ms"), std::string::npos)
      << late.status().ToString();
}

TEST(GpuschedPolicyTest, ShutdownWakesAWaiterAndRefusesNewRequests) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(1);
  c.max_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  ASSERT_TRUE(p->Acquire(0).ok());
  StatusOr<Lease> waiting = Unavailable("not yet");
  std::thread waiter([&] { waiting = p->Acquire(0); });
  WaitForSleepers(clock, 1);
  p->Shutdown(true);
  waiter.join();
  EXPECT_EQ(waiting.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p->Acquire(1).status().code(), StatusCode::kFailedPrecondition);
}

TEST(GpuschedPolicyTest, ReleaseChecksTheTicket) {
  FakeClock clock;
  auto p = MakePolicy(SmallAndBig(2), clock);
  const Lease lease = *p->Acquire(0);
  Lease wrong_gpu = lease;
  wrong_gpu.gpu = 1;
  EXPECT_EQ(p->Release(wrong_gpu, Outcome::kSucceeded).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(p->Release(lease, Outcome::kSucceeded).ok());
  EXPECT_EQ(p->Release(lease, Outcome::kSucceeded).code(), StatusCode::kNotFound);
  EXPECT_EQ(p->load(0).co_runners, 0);
}

TEST(GpuschedPolicyTest, BadConfigNamesTheFieldAndTheValue) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.min_remaining_fraction = 1.5;
  Status s = GpuschedPolicy::Create(c, clock).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("min_remaining_fraction"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("1.5"), std::string::npos) << s.ToString();
  c = SmallAndBig(2);
  c.services[1].name = "small";
  s = GpuschedPolicy::Create(c, clock).status();
  EXPECT_NE(s.message().find("duplicate \"small\""), std::string::npos) << s.ToString();
  c = SmallAndBig(2);
  c.co_runner_weight = -1;
  EXPECT_NE(GpuschedPolicy::Create(c, clock).status().message().find("co_runner_weight"),
            std::string::npos);
  c = SmallAndBig(0);
  EXPECT_NE(GpuschedPolicy::Create(c, clock).status().message().find("gpu_count"),
            std::string::npos);
}

TEST(GpuschedPolicyTest, ManyThreadsLeaveNothingOutstanding) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(4);
  c.max_per_gpu = 2;
  auto p = MakePolicy(c, clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        StatusOr<Lease> lease = p->Acquire((i + t) % 2);
        ASSERT_TRUE(lease.ok());
        EXPECT_LE(p->load(lease->gpu).co_runners, 2);
        ASSERT_TRUE(p->Release(*lease, Outcome::kSucceeded).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(p->outstanding(), 0);
}

}  // namespace
}  // namespace gpusched::dispatch

namespace gpusched::dispatch {
namespace {

// A request's own expected run time places it, and its slot carries that estimate for those
// that come after it: by the service's cost alone both GPUs hold one "big" lease two ms into
// its run (a tie, so GPU0); by the requests' own estimates GPU1's co-runner is about done and
// GPU0's has ~398 ms left.
TEST(GpuschedPolicyTest, UsesTheRequestsOwnExpectedRunTime) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.prior_spread = 0;  // the estimates are exact
  auto p = MakePolicy(c, clock);
  ASSERT_EQ(p->Acquire(1, AcquireOptions{.expected_ms = 400})->gpu, 0);
  ASSERT_EQ(p->Acquire(1, AcquireOptions{.expected_ms = 4})->gpu, 1);
  clock.AdvanceMs(2);
  EXPECT_EQ(p->load(0).mark.fin_time, 400);
  EXPECT_EQ(p->load(1).mark.fin_time, 4);
  EXPECT_EQ(p->Acquire(1, AcquireOptions{.expected_ms = 100})->gpu, 1);
  EXPECT_EQ(p->Acquire(0, AcquireOptions{.expected_ms = -1}).status().code(),
            StatusCode::kInvalidArgument);
}

// Run times spread around their estimates: a lease near its expected end is taken to need
// more than expected - received until the policy has seen the service's estimates hold.
TEST(GpuschedPolicyTest, LearnsHowFarRunTimesSpreadAroundTheirEstimates) {
  FakeClock clock;
  auto p = MakePolicy(SmallAndBig(1), clock);  // prior_spread 0.6
  Lease first = *p->Acquire(0);
  clock.AdvanceMs(9);
  EXPECT_GT(p->load(0).mark.fin_time, 9 + 2);  // 1 ms expected left; a wide spread says more
  ASSERT_TRUE(p->Release(first, Outcome::kSucceeded).ok());
  for (int i = 0; i < 10; ++i) {  // every run takes exactly its 10 ms estimate
    Lease l = *p->Acquire(0);
    clock.AdvanceMs(10);
    ASSERT_TRUE(p->Release(l, Outcome::kSucceeded).ok());
  }
  ASSERT_TRUE(p->Acquire(0).ok());
  clock.AdvanceMs(9);
  EXPECT_EQ(p->load(0).mark.fin_time, clock.NowMs() + 1);  // now it trusts the estimate
}

TEST(GpuschedPolicyTest, CancelEndsAWaitAtOnce) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(1);
  c.max_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  ASSERT_TRUE(p->Acquire(0).ok());
  CancelToken cancel;
  StatusOr<Lease> waiting = Unavailable("not yet");
  std::thread waiter([&] { waiting = p->Acquire(0, AcquireOptions{.cancel = &cancel}); });
  WaitForSleepers(clock, 1);
  cancel.Cancel();  // no clock advance: the cancel alone ends the wait
  waiter.join();
  EXPECT_EQ(waiting.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(waiting.status().message().find("cancelled"), std::string::npos);
  EXPECT_EQ(p->outstanding(), 1);
}

TEST(GpuschedPolicyTest, DeadlineEndsAWait) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(1);
  c.max_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  ASSERT_TRUE(p->Acquire(0).ok());
  StatusOr<Lease> waiting = Unavailable("not yet");
  std::thread waiter([&] { waiting = p->Acquire(0, AcquireOptions{.deadline_ns = 30'000'000}); });
  WaitForSleepers(clock, 1);
  clock.AdvanceMs(30);
  waiter.join();
  EXPECT_EQ(waiting.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(waiting.status().message().find("deadline"), std::string::npos);
}

// Issue 42, item 5: per-request GPU memory. GPU0 has 8 GiB, GPU1 16 GiB. A request is granted
// only where its expected memory fits beside the leases out there; one that fits nowhere now
// waits for a release; one larger than every GPU fails at once, naming the field.
TEST(GpuschedPolicy, Issue42_ExpectedMemoryFitsOrWaits) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.gpu_memory_mib = {8192, 16384};
  auto p = MakePolicy(c, clock);
  Lease a = *p->Acquire(0, AcquireOptions{.expected_mem_mib = 12000});
  EXPECT_EQ(a.gpu, 1);  // fits only GPU1
  EXPECT_EQ(p->load(1).free_mib, 16384 - 12000);
  Lease b = *p->Acquire(0, AcquireOptions{.expected_mem_mib = 6000});
  EXPECT_EQ(b.gpu, 0);
  StatusOr<Lease> waiting = Unavailable("not yet");
  std::thread waiter([&] { waiting = p->Acquire(0, AcquireOptions{.expected_mem_mib = 5000}); });
  WaitForSleepers(clock, 1);  // 2192 and 4384 MiB free: it waits
  ASSERT_TRUE(p->Release(a, Outcome::kSucceeded).ok());
  waiter.join();
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ(waiting->gpu, 1);
  StatusOr<Lease> never = p->Acquire(0, AcquireOptions{.expected_mem_mib = 20000});
  EXPECT_EQ(never.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(never.status().message().find("expected_mem_mib"), std::string::npos);
  EXPECT_NE(never.status().message().find("fits no GPU"), std::string::npos);
  // Without gpu_memory_mib a request asking for memory is refused, naming the field.
  auto untracked = MakePolicy(SmallAndBig(1), clock);
  EXPECT_EQ(untracked->Acquire(0, AcquireOptions{.expected_mem_mib = 1}).status().code(),
            StatusCode::kInvalidArgument);
  c.gpu_memory_mib = {8192};  // one entry for two GPUs
  EXPECT_NE(ValidateGpuschedConfig(c).message().find("gpu_memory_mib"), std::string::npos);
}

// A model stays on the GPU that has it loaded while that GPU's expected finish is within
// affinity_margin_ms of the earliest; beyond the margin it goes where it finishes first.
TEST(GpuschedPolicy, Issue42_ModelAffinityWithinMargin) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.prior_spread = 0;
  c.affinity_margin_ms = 15;
  c.models_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  ASSERT_EQ(p->Acquire(0, AcquireOptions{.model = "resnet"})->gpu, 0);
  EXPECT_EQ(p->load(0).models, (std::vector<std::string>{"resnet"}));
  // GPU0 runs a 10 ms lease: a second resnet request finishes in 20 ms there, 10 on idle GPU1.
  EXPECT_EQ(p->Acquire(0, AcquireOptions{.model = "resnet"})->gpu, 0);
  // Two 10 ms leases on GPU0 now: 30 ms there against 10, beyond the margin.
  EXPECT_EQ(p->Acquire(0, AcquireOptions{.model = "resnet"})->gpu, 1);
  // Without a model the least added slowdown decides (GPU1, one co-runner).
  EXPECT_EQ(p->Acquire(0)->gpu, 1);
  EXPECT_EQ(p->load(1).models, (std::vector<std::string>{"resnet"}));
  // models_per_gpu 1: a new model (two co-runners on each GPU: a tie, GPU0) evicts resnet.
  ASSERT_EQ(p->Acquire(0, AcquireOptions{.model = "bert"})->gpu, 0);
  EXPECT_EQ(p->load(0).models, (std::vector<std::string>{"bert"}));
}

// Waiting requests are granted by priority, then arrival; a lower-priority request arriving
// while they wait does not pass them even when a GPU frees.
TEST(GpuschedPolicy, Issue42_PriorityOrder) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(1);
  c.max_per_gpu = 1;
  auto p = MakePolicy(c, clock);
  Lease running = *p->Acquire(0);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  const int priorities[] = {0, 5, 0, 5};  // arrival order; expected grants: 1, 3, 0, 2
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      Lease l = *p->Acquire(0, AcquireOptions{.priority = priorities[i]});
      std::lock_guard lock(mu);
      order.push_back(i);
      (void)p->Release(l, Outcome::kSucceeded);
    });
    WaitForSleepers(clock, i + 1);  // each arrives after the one before waits
  }
  ASSERT_TRUE(p->Release(running, Outcome::kSucceeded).ok());
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{1, 3, 0, 2}));
}

// GPU1 runs the same service twice as slowly: once the service ran kSpeedMinRuns times on each
// GPU, GPU1's factor is the learned 2, not its seed 3, and placement counts it.
TEST(GpuschedPolicy, Issue42_LearnedSpeedFactors) {
  FakeClock clock;
  GpuschedConfig c = SmallAndBig(2);
  c.gpu_speed = {1, 3};  // seeded: GPU1 three times as slow
  auto p = MakePolicy(c, clock);
  EXPECT_DOUBLE_EQ(p->load(1).speed, 3);
  for (int i = 0; i < kSpeedMinRuns; ++i) {
    for (int gpu : {0, 1}) {
      ASSERT_TRUE(p->SetGpuEnabled(1 - gpu, false).ok());
      Lease l = *p->Acquire(0);
      ASSERT_EQ(l.gpu, gpu);
      clock.AdvanceMs(gpu == 0 ? 10 : 20);  // alone: 10 ms on GPU0, 20 on GPU1
      ASSERT_TRUE(p->Release(l, Outcome::kSucceeded).ok());
      ASSERT_TRUE(p->SetGpuEnabled(1 - gpu, true).ok());
    }
  }
  EXPECT_DOUBLE_EQ(p->load(0).speed, 1);
  EXPECT_NEAR(p->load(1).speed, 2, 1e-9);
  // Learned in GPU0 time: GPU1's runs count as 20 / its factor at release (the seed 3 until
  // the last one), so the cost lies between 20 / 3 and 10.
  EXPECT_GT(p->cost_time_ms(0), 20.0 / 3);
  EXPECT_LE(p->cost_time_ms(0), 10 + 1e-9);
  // Both idle: GPU0 (GPU1 would add its own slowdown, 2x - 1x = 1). GPU0 busy with one lease:
  // there the new one adds 1 + 2 x 1 (co_runner_weight 2), on idle GPU1 only 1: GPU1.
  Lease busy = *p->Acquire(0);
  EXPECT_EQ(busy.gpu, 0);
  EXPECT_EQ(p->Acquire(0)->gpu, 1);
}

}  // namespace
}  // namespace gpusched::dispatch
