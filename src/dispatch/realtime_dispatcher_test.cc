// Every scenario of PATENTS.md section 1 (CN113051059B), on the fake clock, named after its
// claim. Defaults: t = 0, cost = 100, wait = 50, try = 10.
#include "dispatch/realtime_dispatcher.h"

#include <gtest/gtest.h>

#include <vector>

#include "dispatch/realtime_test_util.h"

namespace gpusched::dispatch {
namespace {

TEST(CN113051059B, Claim1_DecisionTable) {
  EXPECT_EQ(Decide(50, -1, 0, 100), Decision::kGrab);    // idle, fin in the past
  EXPECT_EQ(Decide(50, 0, 0, 100), Decision::kGrab);     // idle, d = 0
  EXPECT_EQ(Decide(50, 100, 0, 100), Decision::kGrab);   // d = cost: fits
  EXPECT_EQ(Decide(50, 99, 0, 100), Decision::kGiveUp);  // d < cost: would outlast
  EXPECT_EQ(Decide(50, 150, 0, 100), Decision::kGrab);   // d > cost: fits
  EXPECT_EQ(Decide(0, 99, 0, 100), Decision::kGrabDirect);
  EXPECT_EQ(Decide(-5, 99, 0, 100), Decision::kGrabDirect);
}

TEST(CN113051059B, Claim4_GrabSetsLockAndFinTime) {
  FakeClock clock(7);
  auto d = Make(OneService(1), clock);
  std::optional<Lease> lease = d->TryAcquire(0, 50);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 0);
  EXPECT_TRUE(lease->locked);
  EXPECT_EQ(d->mark(0).fin_time, 107);
  EXPECT_EQ(d->mark(0).owner, lease->ticket);
}

// GPU0 gets fin = 90 from a first task of a 90 ms service granted at t = 0.
DispatcherConfig BusyGpuConfig(int gpus) {
  DispatcherConfig c = OneService(gpus);
  c.services.push_back({.name = "warm", .cost_time = 90, .wait_time = 0, .try_time = 10});
  return c;
}

TEST(CN113051059B, Claim2_GiveUpThenRetry) {
  FakeClock clock(0, /*auto_advance_on_sleep=*/true);
  std::vector<DecisionEvent> events;
  DispatcherConfig c = BusyGpuConfig(1);
  c.on_decision = [&](const DecisionEvent& e) { events.push_back(e); };
  auto d = Make(c, clock);
  ASSERT_TRUE(d->TryAcquire(1, 0).has_value());  // "warm": fin = 90
  ASSERT_EQ(d->mark(0).fin_time, 90);
  events.clear();

  StatusOr<Lease> lease = d->Acquire(0);
  ASSERT_TRUE(lease.ok());
  // Gives up at t = 0, 10, 20, 30, 40 (d = 90 ... 50, all < cost 100), then at t = 50 the
  // budget is 0 and claim 3 grabs directly.
  ASSERT_EQ(events.size(), 6u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(events[i].now, 10 * i);
    EXPECT_EQ(events[i].wait_left, 50 - 10 * i);
    EXPECT_EQ(events[i].decision, Decision::kGiveUp);
    EXPECT_EQ(events[i].gpu, -1);
  }
  EXPECT_EQ(events[5].now, 50);
  EXPECT_EQ(events[5].decision, Decision::kGrabDirect);
  EXPECT_EQ(lease->attempts, 6);
  EXPECT_EQ(d->mark(0).fin_time, 150);
  EXPECT_EQ(d->mark(0).owner, lease->ticket);
  EXPECT_EQ(d->Metrics().services[0].give_ups, 5u);
  EXPECT_EQ(d->Metrics().services[0].direct_grabs, 1u);
}

TEST(CN113051059B, Claim2_ElapsedBudgetOption) {
  // With the budget measured as elapsed time, a clock that jumps 25 ms per sleep spends the
  // 50 ms budget in two rounds instead of five.
  FakeClock clock(0, true);
  DispatcherConfig c = BusyGpuConfig(1);
  c.services[0].try_time = 25;
  c.budget = WaitBudget::kElapsed;
  auto d = Make(c, clock);
  ASSERT_TRUE(d->TryAcquire(1, 0).has_value());
  StatusOr<Lease> lease = d->Acquire(0);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->attempts, 3);  // t = 0, 25 give up; t = 50 direct
  EXPECT_EQ(d->mark(0).fin_time, 150);
}

TEST(CN113051059B, Claim3_DirectModeALocksEarliestFinish) {
  FakeClock clock(0);
  auto d = Make(BusyGpuConfig(2), clock);
  ASSERT_TRUE(d->TryAcquire(1, 0).has_value());  // GPU0: fin 90
  ASSERT_TRUE(d->TryAcquire(0, 0).has_value());  // GPU1 (fin 0 < 90): fin 100
  clock.AdvanceMs(5);
  std::optional<Lease> lease = d->TryAcquire(0, 0);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 0);  // fin 90 < 100
  EXPECT_TRUE(lease->locked);
  EXPECT_EQ(d->mark(0).fin_time, 105);
  EXPECT_EQ(d->mark(0).owner, lease->ticket);
}

TEST(CN113051059B, Claim3_DirectModeBRunsWithoutLock) {
  FakeClock clock(0);
  DispatcherConfig c = BusyGpuConfig(1);
  c.direct = DirectMode::kNoLock;
  auto d = Make(c, clock);
  std::optional<Lease> warm = d->TryAcquire(1, 10);  // claim 1 grab of the idle GPU: locked
  ASSERT_TRUE(warm.has_value());
  std::optional<Lease> lease = d->TryAcquire(0, 0);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 0);
  EXPECT_FALSE(lease->locked);
  EXPECT_EQ(d->mark(0).fin_time, 90);  // untouched
  EXPECT_EQ(d->mark(0).owner, warm->ticket);
}

TEST(CN113051059B, Claim1_PrefersIdleGpuOverBusyOne) {
  // GPU0 with d = 50 (< cost 100) and GPU1 idle: the task goes to GPU1.
  FakeClock clock(0);
  DispatcherConfig c = OneService(2);
  c.services.push_back({.name = "half", .cost_time = 50, .wait_time = 0, .try_time = 10});
  auto d = Make(c, clock);
  ASSERT_EQ(d->TryAcquire(1, 0)->gpu, 0);  // GPU0: fin 50
  std::optional<Lease> lease = d->TryAcquire(0, 50);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 1);
}

TEST(CN113051059B, Claim1_EarliestFinishScanOrderOption) {
  // Both GPUs qualify (d >= cost); index order takes GPU0, earliest-finish takes GPU1.
  FakeClock clock(0);
  DispatcherConfig c = OneService(2);
  c.services.push_back({.name = "long", .cost_time = 300, .wait_time = 0, .try_time = 10});
  c.services.push_back({.name = "mid", .cost_time = 200, .wait_time = 0, .try_time = 10});
  for (ScanOrder scan : {ScanOrder::kIndex, ScanOrder::kEarliestFinish}) {
    c.scan = scan;
    auto d = Make(c, clock);
    ASSERT_EQ(d->TryAcquire(1, 0)->gpu, 0);  // GPU0 fin = now + 300
    ASSERT_EQ(d->TryAcquire(2, 0)->gpu, 1);  // GPU1 fin = now + 200
    EXPECT_EQ(d->TryAcquire(0, 50)->gpu, scan == ScanOrder::kIndex ? 0 : 1) << ScanOrderName(scan);
  }
}

TEST(CN113051059B, Claim1_QuirkSecondTaskOfSameServiceAlsoGrabs) {
  // Right after a grab, d == cost, so a simultaneous second task co-runs on the same GPU.
  FakeClock clock(0);
  auto d = Make(OneService(2), clock);
  std::optional<Lease> a = d->TryAcquire(0, 50);
  std::optional<Lease> b = d->TryAcquire(0, 50);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->gpu, 0);
  EXPECT_EQ(b->gpu, 0);
  EXPECT_EQ(d->mark(0).owner, b->ticket);  // the newer grab owns the mark
}

TEST(CN113051059B, Claim4_MaxFinTimeOption) {
  // Literal claim 4 lowers fin_time from 300 to 110; the max option keeps 300.
  DispatcherConfig c = OneService(1);
  c.services.push_back({.name = "long", .cost_time = 300, .wait_time = 0, .try_time = 10});
  for (FinTimeUpdate mode : {FinTimeUpdate::kLiteral, FinTimeUpdate::kMax}) {
    FakeClock clock(0);
    c.fin_update = mode;
    auto d = Make(c, clock);
    ASSERT_TRUE(d->TryAcquire(1, 0).has_value());
    clock.AdvanceMs(10);
    ASSERT_TRUE(d->TryAcquire(0, 50).has_value());  // d = 290 >= 100: grab
    EXPECT_EQ(d->mark(0).fin_time, mode == FinTimeUpdate::kLiteral ? 110 : 300);
  }
}

TEST(CN113051059B, Claim5_OwnerReleasesNonOwnerDoesNot) {
  FakeClock clock(0);
  auto d = Make(OneService(1), clock);
  std::optional<Lease> first = d->TryAcquire(0, 50);
  std::optional<Lease> second = d->TryAcquire(0, 50);  // co-runs (quirk) and owns the mark
  ASSERT_TRUE(first && second);
  clock.SetMs(40);
  d->Complete(*first);  // not the owner: mark unchanged
  EXPECT_EQ(d->mark(0).fin_time, 100);
  EXPECT_EQ(d->mark(0).owner, second->ticket);
  clock.SetMs(60);
  d->Complete(*second);  // the owner finishes at t = 60
  EXPECT_EQ(d->mark(0).fin_time, 60);
  EXPECT_EQ(d->mark(0).owner, 0u);
}

TEST(CN113051059B, Claim5_LiteralReleaseOption) {
  FakeClock clock(0);
  DispatcherConfig c = OneService(1);
  c.release = ReleaseMode::kLiteral;
  auto d = Make(c, clock);
  std::optional<Lease> first = d->TryAcquire(0, 50);
  ASSERT_TRUE(d->TryAcquire(0, 50).has_value());  // a newer task owns the mark
  clock.SetMs(40);
  d->Complete(*first);  // literal: a non-owner clears the newer owner's mark
  EXPECT_EQ(d->mark(0).fin_time, 40);
  EXPECT_EQ(d->mark(0).owner, 0u);
}

TEST(CN113051059B, Claim6_CostIsMeanOfObservedDurations) {
  FakeClock clock(0);
  auto d = Make(OneService(1), clock);
  for (DurationMs run : {80, 120}) {
    std::optional<Lease> l = d->TryAcquire(0, 0);
    clock.AdvanceMs(run);
    d->Complete(*l);
  }
  EXPECT_EQ(d->cost_time(0), 100);
  // The default is dropped at the first observation: one run of 80 gives 80, not 90.
  auto d2 = Make(OneService(1), clock);
  std::optional<Lease> l = d2->TryAcquire(0, 0);
  clock.AdvanceMs(80);
  d2->Complete(*l);
  EXPECT_EQ(d2->cost_time(0), 80);
}

TEST(CN113051059B, Claim6_EmaAndOfflineOptions) {
  FakeClock clock(0);
  DispatcherConfig c = OneService(1);
  c.learning = CostLearning::kEma;
  auto ema = Make(c, clock);
  c.learning = CostLearning::kOffline;
  auto offline = Make(c, clock);
  for (RealtimeDispatcher* d : {ema.get(), offline.get()}) {
    std::optional<Lease> l = d->TryAcquire(0, 0);
    clock.AdvanceMs(200);
    d->Complete(*l);
  }
  EXPECT_EQ(ema->cost_time(0), 120);  // 0.2 * 200 + 0.8 * 100
  EXPECT_EQ(offline->cost_time(0), 100);
}

TEST(CN113051059B, Claim6_OfflineCostTable) {
  StatusOr<std::map<std::string, DurationMs>> table =
      ParseCostTable("# measured offline\nocr 140\n\nasr=75  # ms\n");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->at("ocr"), 140);
  EXPECT_EQ(table->at("asr"), 75);
  DispatcherConfig c = OneService(1);
  EXPECT_EQ(ApplyCostTable(*table, c).code(), StatusCode::kNotFound);  // no "asr" here
  table->erase("asr");
  ASSERT_TRUE(ApplyCostTable(*table, c).ok());
  EXPECT_EQ(c.services[0].cost_time, 140);
  EXPECT_FALSE(ParseCostTable("ocr fast\n").ok());
  EXPECT_FALSE(ParseCostTable("ocr\n").ok());
}

TEST(CN113051059B, Claim7_RejectsWaitNotBelowCost) {
  FakeClock clock(0);
  DispatcherConfig c = OneService(1);
  c.services[0].wait_time = 100;
  Status s = RealtimeDispatcher::Create(c, clock).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("services[ocr].wait_time"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("100"), std::string::npos) << s.message();
  c.services[0].wait_time = 150;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.services[0].wait_time = 99;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.services[0].try_time = 0;
  EXPECT_NE(ValidateConfig(c).message().find("try_time"), std::string::npos);
  c.services[0].try_time = 10;
  c.services.push_back(c.services[0]);
  EXPECT_NE(ValidateConfig(c).message().find("duplicate"), std::string::npos);
  c.services.pop_back();
  c.gpu_count = 0;
  EXPECT_NE(ValidateConfig(c).message().find("gpu_count"), std::string::npos);
}

TEST(RealtimeDispatcherTest, RunReturnsResultAndRecordsMetrics) {
  FakeClock clock(0);
  auto d = Make(OneService(2), clock);
  StatusOr<int> r = d->Run("ocr", [&](int gpu) {
    clock.AdvanceMs(30);
    return gpu + 40;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 40);
  EXPECT_EQ(d->mark(0).owner, 0u);  // released by Run
  EXPECT_EQ(d->mark(0).fin_time, 30);
  EXPECT_EQ(d->Run("nope", [](int) {}).code(), StatusCode::kNotFound);
  clock.AdvanceMs(30);
  DispatchMetrics m = d->Metrics();
  EXPECT_EQ(m.services[0].completed, 1u);
  EXPECT_DOUBLE_EQ(m.services[0].run_ms_mean, 30);
  EXPECT_DOUBLE_EQ(m.services[0].queue_ms_mean, 0);
  EXPECT_DOUBLE_EQ(m.services[0].cost_time_ms, 30);
  EXPECT_DOUBLE_EQ(m.gpus[0].busy_ms, 30);
  EXPECT_DOUBLE_EQ(m.gpus[0].occupancy, 0.5);
  EXPECT_EQ(m.gpus[1].started, 0u);
}

TEST(RealtimeDispatcherTest, SubmitRunsOnThePoolAndNeedsOne) {
  FakeClock clock(0);
  auto d = Make(OneService(1), clock);
  EXPECT_EQ(d->Submit("ocr", [](int) { return 1; }).get().status().code(),
            StatusCode::kFailedPrecondition);
  WorkPool pool(2);
  auto with_pool = RealtimeDispatcher::Create(OneService(1), clock, &pool);
  ASSERT_TRUE(with_pool.ok());
  std::future<StatusOr<int>> f = (*with_pool)->Submit("ocr", [](int gpu) { return gpu + 7; });
  StatusOr<int> r = f.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
}

}  // namespace
}  // namespace gpusched::dispatch
