// CN110955526B steps (9) and (10) end to end over simulated devices: the mechanism around the
// pure policies (cache map, streams and memory taken and returned, waiting, moves, fallback).

#include "dispatch/chunks/chunk_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "dispatch/sim_device.h"

namespace gpusched::chunks {
namespace {

// A SimDevice whose copies to the host fail, recording, in order, every stream it
// synchronised and every buffer freed (issue 40: ChunkScheduler freed a failed subtask's
// buffers before synchronising its stream).
class FailingCopyDevice final : public dispatch::Device {
 public:
  explicit FailingCopyDevice(std::unique_ptr<dispatch::SimDevice> inner) : inner_(std::move(inner)) {}
  int index() const override { return inner_->index(); }
  std::string name() const override { return inner_->name(); }
  StatusOr<void*> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  Status Free(void* ptr) override {
    Record("free");
    return inner_->Free(ptr);
  }
  size_t total_bytes() const override { return inner_->total_bytes(); }
  size_t used_bytes() const override { return inner_->used_bytes(); }
  int stream_count() const override { return inner_->stream_count(); }
  int free_streams() const override { return inner_->free_streams(); }
  StatusOr<dispatch::StreamId> AcquireStream() override { return inner_->AcquireStream(); }
  Status ReleaseStream(dispatch::StreamId stream) override { return inner_->ReleaseStream(stream); }
  Status CopyToDevice(dispatch::StreamId stream, void* dst, const void* src, size_t bytes) override {
    Record("copy in");
    return inner_->CopyToDevice(stream, dst, src, bytes);
  }
  Status CopyToHost(dispatch::StreamId stream, void* dst, const void* src, size_t bytes) override {
    Record("copy out (failed)");
    (void)stream, (void)dst, (void)src, (void)bytes;
    return Internal("injected: copy to host failed");
  }
  Status Launch(dispatch::StreamId stream, dispatch::Kernel kernel) override {
    Record("launch");
    return inner_->Launch(stream, std::move(kernel));
  }
  Status Synchronize(dispatch::StreamId stream) override {
    Record("sync");
    return inner_->Synchronize(stream);
  }
  Status SynchronizeAll() override {
    Record("sync all");
    return inner_->SynchronizeAll();
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  void Record(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  std::unique_ptr<dispatch::SimDevice> inner_;
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

class ChunkSchedulerTest : public ::testing::Test {
 protected:
  void MakeGpus(int n, MiB memory_mib = 64, int streams = 4) {
    for (int i = 0; i < n; ++i) {
      devices_.push_back(std::make_unique<dispatch::SimDevice>(
          dispatch::SimDeviceOptions{i, "", memory_mib, streams}, clock_));
    }
  }
  std::vector<dispatch::Device*> Devices() {
    std::vector<dispatch::Device*> d;
    for (auto& p : devices_) d.push_back(p.get());
    return d;
  }
  // A stream subtask scaling `in` by 2 into `out` (both `n` uint32).
  Subtask Scale(uint64_t buffer, const uint32_t* in, uint32_t* out, int64_t n) {
    Subtask s;
    s.key = ChunkKey{buffer, 0};
    s.host_in0 = reinterpret_cast<const std::byte*>(in);
    s.in_bytes = n * 4;
    s.kernel = *kernels_->Find("scale_u32");
    s.params = &params_;
    s.host_out = reinterpret_cast<std::byte*>(out);
    s.out_bytes = n * 4;
    return s;
  }
  Subtask Cache(uint64_t buffer, const uint32_t* in, int64_t n) {
    Subtask s;
    s.kind = Subtask::Kind::kCache;
    s.key = ChunkKey{buffer, 0};
    s.host_in0 = reinterpret_cast<const std::byte*>(in);
    s.in_bytes = n * 4;
    return s;
  }

  FakeClock clock_{0, /*auto_advance_on_sleep=*/true};
  std::vector<std::unique_ptr<dispatch::SimDevice>> devices_;
  std::unique_ptr<KernelRegistry> kernels_ = KernelRegistry::WithBuiltins();
  KernelParams params_{2.0};
  InlineExecutor inline_;
  std::vector<uint32_t> in_ = std::vector<uint32_t>(1024, 21);
  std::vector<uint32_t> out_ = std::vector<uint32_t>(1024, 0);
};

TEST_F(ChunkSchedulerTest, CN110955526B_Step9_CacheSubtaskGoesToLowestUsageAndUpdatesCacheMap) {
  MakeGpus(2, 10);
  auto busy = devices_[0]->Allocate(7 * kMiB);  // G0 70 % used, G1 0 %
  ASSERT_TRUE(busy.ok());
  ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
  ASSERT_TRUE(sched.Run({Cache(5, in_.data(), 1024)}, inline_).ok());
  EXPECT_EQ(sched.CachedOn(ChunkKey{5, 0}), 1);
  EXPECT_EQ(sched.stats().cached, 1);
  EXPECT_EQ(devices_[1]->used_bytes(), 4096u);  // the resident copy, really accounted
  sched.DropCached(5);
  EXPECT_EQ(devices_[1]->used_bytes(), 0u);
  EXPECT_EQ(sched.CachedOn(ChunkKey{5, 0}), std::nullopt);
}

TEST_F(ChunkSchedulerTest, CN110955526B_Step10_3_CachedChunkRunsOnItsGpuWithoutCopy) {
  MakeGpus(3);
  ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
  ASSERT_TRUE(sched.Run({Cache(5, in_.data(), 1024)}, inline_).ok());
  const int cached_on = *sched.CachedOn(ChunkKey{5, 0});
  std::vector<SchedulerEvent> events;
  sched.SetObserver([&](const SchedulerEvent& e) { events.push_back(e); });
  sched.ResetStats();
  ASSERT_TRUE(sched.Run({Scale(5, in_.data(), out_.data(), 1024)}, inline_).ok());
  EXPECT_EQ(sched.stats().bytes_h2d, 0);  // no copy: the chunk was resident
  EXPECT_EQ(sched.stats().cache_hits, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().gpu, cached_on);
  EXPECT_EQ(events.front().decision, "run-cached g" + std::to_string(cached_on));
  EXPECT_EQ(out_, std::vector<uint32_t>(1024, 42));
}

TEST_F(ChunkSchedulerTest, CN110955526B_Step10_6_CachedGpuBusyMovesChunk) {
  MakeGpus(2);
  ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
  ASSERT_TRUE(sched.Run({Cache(5, in_.data(), 1024)}, inline_).ok());
  ASSERT_EQ(sched.CachedOn(ChunkKey{5, 0}), 0);  // equal GPUs: lowest id
  std::vector<dispatch::StreamId> held;  // another user holds every stream of G0
  for (int i = 0; i < 4; ++i) held.push_back(*devices_[0]->AcquireStream());
  sched.ResetStats();
  ASSERT_TRUE(sched.Run({Scale(5, in_.data(), out_.data(), 1024)}, inline_).ok());
  EXPECT_EQ(sched.CachedOn(ChunkKey{5, 0}), 1);
  EXPECT_EQ(sched.stats().moves, 1);
  EXPECT_EQ(sched.stats().bytes_h2d, 4096);
  EXPECT_EQ(devices_[0]->used_bytes(), 0u);     // the old copy is freed
  EXPECT_EQ(devices_[1]->used_bytes(), 4096u);  // the moved copy stays
  EXPECT_EQ(out_, std::vector<uint32_t>(1024, 42));
  for (auto s : held) ASSERT_TRUE(devices_[0]->ReleaseStream(s).ok());
}

TEST_F(ChunkSchedulerTest, CN110955526B_Step10_9_WaitsThenRunsAfterStreamReleased) {
  MakeGpus(1, 64, /*streams=*/1);
  ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
  // The first kernel holds the only stream until the scheduler has reported a WAIT.
  std::promise<void> waited;
  std::shared_future<void> gate = waited.get_future().share();
  std::atomic<bool> signalled{false};
  sched.SetObserver([&](const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::kWaiting && !signalled.exchange(true)) waited.set_value();
  });
  Kernel gated = **kernels_->Find("scale_u32");
  gated.name = "gated_scale";
  auto run = gated.run;
  gated.run = [run, gate](const ChunkIo& io, const KernelParams& p) {
    gate.wait();
    return run(io, p);
  };
  ASSERT_TRUE(kernels_->Register(gated).ok());
  std::vector<uint32_t> out2(1024, 0);
  Subtask first = Scale(1, in_.data(), out_.data(), 1024);
  first.kernel = *kernels_->Find("gated_scale");
  Subtask second = Scale(2, in_.data(), out2.data(), 1024);
  ThreadPool pool(2);
  ASSERT_TRUE(sched.Run({first, second}, pool).ok());
  EXPECT_TRUE(signalled.load());
  EXPECT_GE(sched.stats().waits, 1);
  EXPECT_EQ(sched.stats().subtasks, 2);
  EXPECT_EQ(out_, std::vector<uint32_t>(1024, 42));
  EXPECT_EQ(out2, std::vector<uint32_t>(1024, 42));
}

TEST_F(ChunkSchedulerTest, CN110955526B_Step10_StreamAndMemoryReturnedOnCompletion) {
  MakeGpus(2);
  ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
  size_t max_used = 0;
  sched.SetObserver([&](const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::kPlaced) max_used = std::max(max_used, devices_[e.gpu]->used_bytes());
  });
  std::vector<Subtask> subtasks;
  std::vector<std::vector<uint32_t>> outs(8, std::vector<uint32_t>(1024));
  for (int i = 0; i < 8; ++i) subtasks.push_back(Scale(10 + i, in_.data(), outs[i].data(), 1024));
  ThreadPool pool(4);
  ASSERT_TRUE(sched.Run(subtasks, pool).ok());
  EXPECT_GE(max_used, 8192u);  // input + output were allocated while running
  for (auto& d : devices_) {
    EXPECT_EQ(d->used_bytes(), 0u);
    EXPECT_EQ(d->free_streams(), 4);
  }
  for (auto& o : outs) EXPECT_EQ(o, std::vector<uint32_t>(1024, 42));
}

TEST_F(ChunkSchedulerTest, CN110955526B_Step10_9_CpuFallbackOption) {
  MakeGpus(1, 64, 1);
  auto held = devices_[0]->AcquireStream();
  ChunkConfig config;
  config.no_fit = NoFitAction::kCpuFallback;
  ChunkScheduler sched(Devices(), config, clock_);
  ASSERT_TRUE(sched.Run({Scale(1, in_.data(), out_.data(), 1024)}, inline_).ok());
  EXPECT_EQ(sched.stats().cpu_runs, 1);
  EXPECT_EQ(sched.stats().bytes_h2d, 0);
  EXPECT_EQ(out_, std::vector<uint32_t>(1024, 42));
  ASSERT_TRUE(devices_[0]->ReleaseStream(*held).ok());
}

// A kernel's failure fails its subtask and Run, naming the kernel, on a GPU stream and on the
// CPU executor (claim 2) alike; the subtask run before it completed, and no memory is left.
TEST_F(ChunkSchedulerTest, CN110955526B_FailedKernelFailsTheRunOnGpuAndCpu) {
  MakeGpus(1);
  Kernel refuse = **kernels_->Find("scale_u32");
  refuse.name = "refuse_first_input_21";
  refuse.run = [run = refuse.run](const ChunkIo& io, const KernelParams& p) {
    if (static_cast<uint8_t>(io.in0[0]) == 21) return InvalidArgument("21 is not accepted");
    return run(io, p);
  };
  ASSERT_TRUE(kernels_->Register(refuse).ok());
  std::vector<uint32_t> ok_in(1024, 5), ok_out(1024, 0);
  for (const bool on_cpu : {false, true}) {
    SCOPED_TRACE(on_cpu ? "cpu executor" : "gpu stream");
    ChunkScheduler sched(Devices(), ChunkConfig{}, clock_);
    Subtask bad = Scale(1, in_.data(), out_.data(), 1024), good = Scale(2, ok_in.data(), ok_out.data(), 1024);
    bad.kernel = good.kernel = *kernels_->Find("refuse_first_input_21");
    bad.on_cpu = good.on_cpu = on_cpu;
    const Status s = sched.Run({good, bad}, inline_);  // inline: in this order
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "kernel refuse_first_input_21: 21 is not accepted");
    EXPECT_EQ(sched.stats().subtasks, 2);
    EXPECT_EQ(ok_out, std::vector<uint32_t>(1024, 10));
    std::fill(ok_out.begin(), ok_out.end(), 0);
  }
  for (auto& d : devices_) EXPECT_EQ(d->used_bytes(), 0u);
}

TEST_F(ChunkSchedulerTest, WaitWithNothingInFlightFailsAfterIdleWait) {
  MakeGpus(1, 64, 1);
  auto held = devices_[0]->AcquireStream();  // another user never gives it back
  ChunkConfig config;
  config.idle_wait_ms = 5;
  ChunkScheduler sched(Devices(), config, clock_);
  const Status s = sched.Run({Scale(1, in_.data(), out_.data(), 1024)}, inline_);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("found no GPU stream and memory for 5 ms"), std::string::npos) << s.message();
  ASSERT_TRUE(devices_[0]->ReleaseStream(*held).ok());
}

TEST_F(ChunkSchedulerTest, StreamsPerGpuCapsConcurrentSubtasks) {
  MakeGpus(1, 64, 4);
  ChunkConfig config;
  config.streams_per_gpu = 1;
  ChunkScheduler sched(Devices(), config, clock_);
  int running = 0, max_running = 0;
  sched.SetObserver([&](const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::kPlaced) max_running = std::max(max_running, ++running);
    if (e.kind == SchedulerEvent::Kind::kCompleted) --running;
  });
  std::vector<std::vector<uint32_t>> outs(6, std::vector<uint32_t>(1024));
  std::vector<Subtask> subtasks;
  for (int i = 0; i < 6; ++i) subtasks.push_back(Scale(i + 1, in_.data(), outs[i].data(), 1024));
  ThreadPool pool(4);
  ASSERT_TRUE(sched.Run(subtasks, pool).ok());
  EXPECT_EQ(max_running, 1);
}

TEST_F(ChunkSchedulerTest, RoundRobinIgnoresCacheAndCopiesMore) {
  MakeGpus(2);
  for (StreamPolicy policy : {StreamPolicy::kPatent, StreamPolicy::kRoundRobin}) {
    ChunkScheduler sched(Devices(), ChunkConfig{}, clock_, policy);
    std::vector<Subtask> cache, work;
    std::vector<std::vector<uint32_t>> outs(3, std::vector<uint32_t>(1024));
    for (int i = 0; i < 3; ++i) {
      cache.push_back(Cache(1, in_.data(), 1024));
      cache.back().key.index = i;
      work.push_back(Scale(1, in_.data(), outs[i].data(), 1024));
      work.back().key.index = i;
    }
    ASSERT_TRUE(sched.Run(cache, inline_).ok());  // step 9: chunks 0,1,2 on g0,g1,g0
    sched.ResetStats();
    // Two passes: round-robin's counter is in phase with the cache on the first (g0,g1,g0)
    // and out of phase on the second (g1,g0,g1), where every chunk is copied again.
    ASSERT_TRUE(sched.Run(work, inline_).ok());
    ASSERT_TRUE(sched.Run(work, inline_).ok());
    EXPECT_EQ(sched.stats().bytes_h2d, policy == StreamPolicy::kPatent ? 0 : 3 * 4096);
    for (auto& o : outs) EXPECT_EQ(o, std::vector<uint32_t>(1024, 42));
  }
}


// Issue 40: a copy that fails after the kernel was enqueued: the stream is synchronised
// before any buffer of the subtask is freed (the old code returned at the failed copy and
// freed the input and output while the kernel could still use them), and the error reaches
// the caller with the memory and the stream returned.
TEST_F(ChunkSchedulerTest, Issue40_FailedCopySynchronisesTheStreamBeforeFreeingItsBuffers) {
  FailingCopyDevice dev(std::make_unique<dispatch::SimDevice>(
      dispatch::SimDeviceOptions{0, "", 64, 1}, clock_));
  ChunkScheduler sched({&dev}, ChunkConfig{}, clock_);
  const Status s = sched.Run({Scale(1, in_.data(), out_.data(), 1024)}, inline_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("copy to host failed"), std::string::npos) << s.ToString();
  const std::vector<std::string> events = dev.events();
  const auto failed = std::find(events.begin(), events.end(), "copy out (failed)");
  ASSERT_NE(failed, events.end());
  const auto first_free = std::find(failed, events.end(), "free");
  ASSERT_NE(first_free, events.end());
  EXPECT_NE(std::find(failed, first_free, "sync"), first_free)
      << "a buffer was freed before its stream was synchronised";
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_EQ(dev.free_streams(), 1);
}

}  // namespace
}  // namespace gpusched::chunks
