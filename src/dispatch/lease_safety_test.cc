// The RealtimeDispatcher's safety net around the claims: checked releases, failed requests,
// the per-GPU cap, the acquire deadline, GPUs out of service and shutdown. Fake clock.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "dispatch/realtime_dispatcher.h"
#include "dispatch/realtime_test_util.h"

namespace gpusched::dispatch {
namespace {

TEST(LeaseSafety, ReleaseRefusesDuplicateZeroedMadeUpAndForeignTickets) {
  FakeClock clock(0);
  auto d = Make(OneService(2), clock);
  auto other = Make(OneService(2), clock);
  std::optional<Lease> lease = d->TryAcquire(0, 50);
  std::optional<Lease> foreign = other->TryAcquire(0, 50);
  ASSERT_TRUE(lease && foreign);
  // Both dispatchers' first grant: same GPU and service, different tickets.
  EXPECT_NE(lease->ticket, foreign->ticket);
  EXPECT_EQ(d->Release(*foreign, Outcome::kSucceeded).code(), StatusCode::kNotFound);
  Lease zeroed;
  zeroed.gpu = 0;
  zeroed.service = 0;
  EXPECT_EQ(d->Release(zeroed, Outcome::kSucceeded).code(), StatusCode::kNotFound);
  Lease made_up = *lease;
  made_up.ticket += 1000;
  EXPECT_EQ(d->Release(made_up, Outcome::kSucceeded).code(), StatusCode::kNotFound);
  Lease wrong_gpu = *lease;
  wrong_gpu.gpu = 1;
  Status s = d->Release(wrong_gpu, Outcome::kSucceeded);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("granted gpu 0"), std::string::npos) << s.ToString();
  EXPECT_EQ(d->outstanding(), 1);

  ASSERT_TRUE(d->Release(*lease, Outcome::kSucceeded).ok());
  Status twice = d->Release(*lease, Outcome::kSucceeded);
  EXPECT_EQ(twice.code(), StatusCode::kNotFound);
  EXPECT_NE(twice.message().find(std::to_string(lease->ticket)), std::string::npos);
  DispatchMetrics m = d->Metrics();
  EXPECT_EQ(m.services[0].completed, 1u);
  EXPECT_EQ(m.gpus[0].running, 0);
  EXPECT_EQ(d->outstanding(), 0);
}

TEST(LeaseSafety, FailedRequestDoesNotTrainTheCost) {
  FakeClock clock(0);
  auto d = Make(OneService(1), clock);
  std::optional<Lease> failed = d->TryAcquire(0, 0);
  clock.AdvanceMs(2);  // a request that failed fast
  ASSERT_TRUE(d->Release(*failed, Outcome::kFailed).ok());
  EXPECT_EQ(d->cost_time(0), 100);  // unchanged
  EXPECT_EQ(d->mark(0).owner, 0u);  // but the GPU is free again
  std::optional<Lease> ok = d->TryAcquire(0, 0);
  clock.AdvanceMs(80);
  ASSERT_TRUE(d->Release(*ok, Outcome::kSucceeded).ok());
  EXPECT_EQ(d->cost_time(0), 80);
  EXPECT_EQ(d->Metrics().services[0].failed, 1u);
  EXPECT_EQ(d->Metrics().services[0].completed, 2u);
}

TEST(LeaseSafety, RunReleasesAsFailedWhenFnThrows) {
  FakeClock clock(0);
  auto d = Make(OneService(1), clock);
  EXPECT_THROW(d->Run("ocr", [&](int) -> int {
    clock.AdvanceMs(3);
    throw std::runtime_error("model crashed");
  }), std::runtime_error);
  EXPECT_EQ(d->outstanding(), 0);
  EXPECT_EQ(d->cost_time(0), 100);
  EXPECT_EQ(d->Metrics().services[0].failed, 1u);
}

TEST(LeaseSafety, MaxPerGpuCapsCoRunnersAndTimeoutNamesTheLimit) {
  FakeClock clock(0, /*auto_advance_on_sleep=*/true);
  DispatcherConfig c = OneService(1);
  c.max_per_gpu = 1;
  c.acquire_timeout = 70;
  auto d = Make(c, clock);
  StatusOr<Lease> first = d->Acquire(0);
  ASSERT_TRUE(first.ok());
  // Uncapped, claim 1 would grant a second lease at once (d == cost, the same-service quirk),
  // and claim 3 directly at t = 50. The cap refuses both; the deadline ends the wait.
  StatusOr<Lease> second = d->Acquire(0);
  ASSERT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("1 of 1 GPUs at max_per_gpu 1"), std::string::npos)
      << second.status().ToString();
  EXPECT_EQ(clock.NowMs(), 70);
  ASSERT_TRUE(d->Release(*first, Outcome::kSucceeded).ok());
  EXPECT_TRUE(d->Acquire(0).ok());
}

TEST(LeaseSafety, GpuOutOfServiceIsSkippedUntilBack) {
  FakeClock clock(0, /*auto_advance_on_sleep=*/true);
  DispatcherConfig c = OneService(2);
  c.acquire_timeout = 30;
  auto d = Make(c, clock);
  ASSERT_TRUE(d->SetGpuEnabled(0, false).ok());
  EXPECT_EQ(d->SetGpuEnabled(2, false).code(), StatusCode::kInvalidArgument);
  StatusOr<Lease> a = d->Acquire(0);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpu, 1);  // GPU 0 is idle but out of service
  ASSERT_TRUE(d->SetGpuEnabled(1, false).ok());
  StatusOr<Lease> none = d->Acquire(0);
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("2 out of service"), std::string::npos);
  ASSERT_TRUE(d->Release(*a, Outcome::kSucceeded).ok());  // a lease on a disabled GPU ends
  ASSERT_TRUE(d->SetGpuEnabled(0, true).ok());
  StatusOr<Lease> b = d->Acquire(0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->gpu, 0);
}

TEST(LeaseSafety, ShutdownEndsAWaitingAcquire) {
  FakeClock clock(0);
  DispatcherConfig c = OneService(1);
  c.max_per_gpu = 1;
  auto d = Make(c, clock);
  StatusOr<Lease> held = d->Acquire(0);
  ASSERT_TRUE(held.ok());
  Status waiting_result;
  std::thread waiter([&] { waiting_result = d->Acquire(0).status(); });
  while (clock.sleepers() == 0) std::this_thread::yield();  // the waiter gave up once
  d->Shutdown(true);
  clock.AdvanceMs(10);
  waiter.join();
  EXPECT_EQ(waiting_result.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(d->Release(*held, Outcome::kSucceeded).ok());  // release still works
  d->Shutdown(false);
  EXPECT_TRUE(d->Acquire(0).ok());
}

TEST(LeaseSafety, ConfigRejectsNegativeCapAndTimeout) {
  DispatcherConfig c = OneService(1);
  c.max_per_gpu = -1;
  EXPECT_NE(ValidateConfig(c).message().find("max_per_gpu"), std::string::npos);
  c.max_per_gpu = 0;
  c.acquire_timeout = -5;
  EXPECT_NE(ValidateConfig(c).message().find("acquire_timeout: must be >= 0 ms (0: none), got -5"),
            std::string::npos);
}

TEST(LeaseSafety, FractionalCostIsKeptExactlyAndRoundedOnlyAtTheMark) {
  FakeClock clock(0);
  DispatcherConfig c = OneService(1);
  c.services[0] = {.name = "fast", .cost_time = 2.5, .wait_time = 1, .try_time = 1};
  auto d = Make(c, clock);
  EXPECT_DOUBLE_EQ(d->Metrics().services[0].cost_time_ms, 2.5);
  std::optional<Lease> l = d->TryAcquire(0, 1);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(d->mark(0).fin_time, 3);  // 0 + 2.5, rounded to the mark's whole ms
  c.services[0].cost_time = std::nan("");
  EXPECT_NE(ValidateConfig(c).message().find("cost_time: must be finite and > 0 ms, got nan"),
            std::string::npos) << ValidateConfig(c).message();
  c.services[0].cost_time = 0.75;
  EXPECT_NE(ValidateConfig(c).message().find("must be < cost_time (0.75), got 1"),
            std::string::npos) << ValidateConfig(c).message();
}

}  // namespace
}  // namespace gpusched::dispatch
