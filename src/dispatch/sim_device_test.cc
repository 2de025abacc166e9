#include "dispatch/sim_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpusched::dispatch {
namespace {

TEST(SimDeviceTest, MemoryIsAccountedAndCapped) {
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 1, .streams = 1}, clock);
  EXPECT_EQ(dev.total_bytes(), 1u << 20);
  auto a = dev.Allocate(600 * 1024);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(dev.used_bytes(), 600u * 1024);
  auto b = dev.Allocate(600 * 1024);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(dev.Free(*a).ok());
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_EQ(dev.Free(*a).code(), StatusCode::kNotFound);
  EXPECT_EQ(dev.Allocate(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(SimDeviceTest, StreamsAreACountedResourceLowestFirst) {
  FakeClock clock;
  SimDevice dev({.index = 1, .name = "", .memory_mib = 1024, .streams = 2}, clock);
  EXPECT_EQ(dev.free_streams(), 2);
  EXPECT_EQ(*dev.AcquireStream(), 0);
  EXPECT_EQ(*dev.AcquireStream(), 1);
  EXPECT_EQ(dev.AcquireStream().status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(dev.ReleaseStream(0).ok());
  EXPECT_EQ(dev.ReleaseStream(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*dev.AcquireStream(), 0);
}

TEST(SimDeviceTest, CopyComputeCopyBackReallyComputes) {
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 1024, .streams = 1}, clock);
  std::vector<int> host = {1, 2, 3, 4};
  std::vector<int> out(4, 0);
  const size_t bytes = host.size() * sizeof(int);
  void* buf = *dev.Allocate(bytes);
  StreamId s = *dev.AcquireStream();
  ASSERT_TRUE(dev.CopyToDevice(s, buf, host.data(), bytes).ok());
  ASSERT_TRUE(dev.Launch(s, [buf](const KernelContext& ctx) {
                  EXPECT_EQ(ctx.native_stream, nullptr);
                  int* p = static_cast<int*>(buf);
                  for (int i = 0; i < 4; ++i) p[i] *= 10;
                }).ok());
  ASSERT_TRUE(dev.CopyToHost(s, out.data(), buf, bytes).ok());
  ASSERT_TRUE(dev.Synchronize(s).ok());
  EXPECT_EQ(out, (std::vector<int>{10, 20, 30, 40}));
  EXPECT_EQ(dev.CopyToDevice(s, host.data(), host.data(), bytes).code(),
            StatusCode::kInvalidArgument);  // destination is not device memory
  EXPECT_TRUE(dev.Free(buf).ok());
}

TEST(SimDeviceTest, WorkOnOneStreamRunsInOrder) {
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 1024, .streams = 1}, clock);
  std::vector<int> order;  // written only by the one worker of stream 0
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(dev.Launch(0, [&order, i](const KernelContext&) { order.push_back(i); }).ok());
  }
  ASSERT_TRUE(dev.SynchronizeAll().ok());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

// Freed blocks keep their host memory for the next allocation of the same size (no fresh page
// faults per chunk), but the accounting only counts live allocations, and a kept block gives
// way when the capacity is needed for another size.
TEST(SimDeviceTest, FreedBlocksAreReusedButNotAccounted) {
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 8, .streams = 1}, clock);
  void* a = *dev.Allocate(4 << 20);
  ASSERT_TRUE(dev.Free(a).ok());
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_EQ(dev.Free(a).code(), StatusCode::kNotFound);  // kept is not live
  void* b = *dev.Allocate(4 << 20);
  EXPECT_EQ(b, a);
  EXPECT_EQ(dev.used_bytes(), size_t{4} << 20);
  ASSERT_TRUE(dev.Free(b).ok());
  StatusOr<void*> whole = dev.Allocate(8 << 20);  // evicts the kept 4 MiB block
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(dev.used_bytes(), size_t{8} << 20);
  EXPECT_EQ(dev.Allocate(1).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(dev.Free(*whole).ok());
}

// Synchronize may run queued ops on the calling thread; they still run one at a time, in
// stream order, whoever runs them.
TEST(SimDeviceTest, SynchronizeRunsQueuedWorkInOrder) {
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 64, .streams = 2}, clock);
  void* d = *dev.Allocate(4096);
  std::vector<uint32_t> host(1024), back(1024);
  for (int round = 0; round < 200; ++round) {
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(round * 7 + i);
    ASSERT_TRUE(dev.CopyToDevice(1, d, host.data(), 4096).ok());
    ASSERT_TRUE(dev.Launch(1, [d](const KernelContext&) {
                     auto* p = static_cast<uint32_t*>(d);
                     for (int i = 0; i < 1024; ++i) p[i] *= 3;
                   }).ok());
    ASSERT_TRUE(dev.CopyToHost(1, back.data(), d, 4096).ok());
    ASSERT_TRUE(dev.Synchronize(1).ok());
    for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(back[i], host[i] * 3) << "round " << round;
  }
  ASSERT_TRUE(dev.Free(d).ok());
}

// Clock sleeps whole ms; the last fraction of a kernel goes to wait_ns when the device has one,
// with the exact remainder, instead of a whole SleepMs(1) that would end the kernel late.
TEST(SimDeviceTest, LastFractionOfAKernelUsesWaitNs) {
  FakeClock clock(0, /*auto_advance_on_sleep=*/true);
  std::vector<int64_t> waits;  // only the stream's worker or the synchronizer calls it, in turn
  SimDevice dev({.index = 0, .name = "", .memory_mib = 64, .streams = 1}, clock,
                [&](int64_t ns) {
                  waits.push_back(ns);
                  clock.AdvanceMs(1);  // FakeClock moves in ms: more than the kernel asked for
                });
  ASSERT_TRUE(dev.Launch(0, [&](const KernelContext&) { dev.ComputeMs(2.25); }).ok());
  ASSERT_TRUE(dev.SynchronizeAll().ok());
  EXPECT_EQ(waits, (std::vector<int64_t>{250'000}));  // after two whole-ms SleepMs steps
  EXPECT_EQ(dev.compute_steps(), 3u);
}

// A 10 ms kernel alone takes 10 ms of clock time; two of them on two streams share the device
// and each takes 20 ms, give or take the step in which the other one leaves.
TEST(SimDeviceTest, ConcurrentComputeIsProcessorShared) {
  {
    FakeClock clock(0, /*auto_advance_on_sleep=*/true);
    SimDevice dev({.index = 0, .name = "", .memory_mib = 1024, .streams = 1}, clock);
    ASSERT_TRUE(dev.Launch(0, [&](const KernelContext&) { dev.ComputeMs(10); }).ok());
    ASSERT_TRUE(dev.SynchronizeAll().ok());
    EXPECT_EQ(clock.NowMs(), 10);
  }
  FakeClock clock;
  SimDevice dev({.index = 0, .name = "", .memory_mib = 1024, .streams = 2}, clock);
  std::atomic<int> finished{0};
  std::atomic<int64_t> done_at[2] = {-1, -1};
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(dev.Launch(s, [&, s](const KernelContext&) {
                     dev.ComputeMs(10);
                     done_at[s] = clock.NowMs();
                     finished.fetch_add(1);
                   }).ok());
  }
  while (dev.active_compute() < 2) std::this_thread::yield();  // both started at t = 0
  // Advance 1 ms once every running kernel sleeps, then wait until each has taken its step.
  while (finished.load() < 2) {
    const int running = dev.active_compute();
    if (running == 0 || clock.sleepers() != running) {
      std::this_thread::yield();
      continue;
    }
    const uint64_t before = dev.compute_steps();
    clock.AdvanceMs(1);
    while (dev.compute_steps() < before + static_cast<uint64_t>(running)) {
      std::this_thread::yield();
    }
  }
  ASSERT_TRUE(dev.SynchronizeAll().ok());
  for (int s = 0; s < 2; ++s) {
    EXPECT_GE(done_at[s].load(), 19) << "stream " << s;
    EXPECT_LE(done_at[s].load(), 21) << "stream " << s;
  }
}

}  // namespace
}  // namespace gpusched::dispatch
