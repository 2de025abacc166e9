// CN110955526B steps (1)-(4), (11): jobs as DAGs of stages, run with a barrier between stages,
// and correctness on real data against a plain CPU loop.

#include "dispatch/chunks/stage_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "dispatch/sim_device.h"

namespace gpusched::chunks {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Under ASan+UBSan (Debug) or TSan the 1 GiB job takes minutes; the same job runs on 64 MiB.
constexpr int64_t kBigJobBytes = 64 * kMiB;
#else
constexpr int64_t kBigJobBytes = kGiB;
#endif

uint32_t Value(uint64_t i) {  // cheap deterministic data (a splitmix-style hash)
  uint64_t z = i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

class StageRunnerTest : public ::testing::Test {
 protected:
  void MakeGpus(int n, MiB memory_mib, ChunkConfig config) {
    std::vector<dispatch::Device*> raw;
    for (int i = 0; i < n; ++i) {
      devices_.push_back(std::make_unique<dispatch::SimDevice>(
          dispatch::SimDeviceOptions{i, "", memory_mib, 4}, clock_));
      raw.push_back(devices_.back().get());
    }
    scheduler_ = std::make_unique<ChunkScheduler>(raw, config, clock_);
    runner_ = std::make_unique<StageRunner>(*scheduler_, *kernels_, pool_);
  }

  FakeClock clock_{0, true};
  ThreadPool pool_{8};
  std::unique_ptr<KernelRegistry> kernels_ = KernelRegistry::WithBuiltins();
  std::vector<std::unique_ptr<dispatch::SimDevice>> devices_;
  std::unique_ptr<ChunkScheduler> scheduler_;
  std::unique_ptr<StageRunner> runner_;
};

// Registers "timed_<name>" for each built-in `name`: the same kernel, which also records
// when each of its chunks starts and ends on a logical clock (one atomic counter, so every
// start and end is ordered against every other).
struct StageTimes {
  std::atomic<int64_t> clock{0};
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, int64_t>> span;  // kernel -> first start, last end

  void Register(KernelRegistry& kernels, const std::string& name) {
    Kernel timed = **kernels.Find(name);
    timed.name = "timed_" + name;
    timed.native_run = nullptr;
    timed.run = [this, name, run = timed.run](const ChunkIo& io, const KernelParams& p) {
      const int64_t start = ++clock;
      const Status ran = run(io, p);
      const int64_t end = ++clock;
      std::lock_guard<std::mutex> lock(mu);
      auto [it, fresh] = span.try_emplace(name, start, end);
      it->second = {std::min(it->second.first, start), std::max(it->second.second, end)};
      return ran;
    };
    ASSERT_TRUE(kernels.Register(std::move(timed)).ok());
  }
};

TEST_F(StageRunnerTest, CN110955526B_Step11_ThreeStagesRunInOrderWithBarrier) {
  ChunkConfig config;
  config.chunk_bytes = 4096;
  MakeGpus(3, 64, config);
  StageTimes times;
  for (const char* k : {"scale_u32", "vadd_u32", "sum_u32"}) times.Register(*kernels_, k);
  std::vector<uint32_t> a(64 * 1024);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i);
  // The scheduler's own view, in the order its events happened (from the subtask threads).
  std::mutex events_mu;
  std::vector<std::pair<SchedulerEvent::Kind, int>> events;
  scheduler_->SetObserver([&](const SchedulerEvent& e) {
    std::lock_guard<std::mutex> lock(events_mu);
    events.push_back({e.kind, e.stage});
  });
  JobSpec job;
  job.buffers = {{"a", {a.data(), static_cast<int64_t>(a.size() * 4)}}};
  // Declared out of order: the DAG, not the list, decides.
  job.stages = {{"sum", "timed_sum_u32", {}, {"c"}, "total", {}},
                {"add", "timed_vadd_u32", {}, {"b", "a"}, "c", {}},
                {"triple", "timed_scale_u32", {3.0}, {"a"}, "b", {}, 4}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stage_order, (std::vector<std::string>{"triple", "add", "sum"}));

  // Barrier, on the kernels' own clock: a stage starts only after the previous one ended.
  ASSERT_EQ(times.span.size(), 3u);
  const auto triple = times.span.at("scale_u32"), add = times.span.at("vadd_u32"),
             sum = times.span.at("sum_u32");
  EXPECT_LT(triple.first, triple.second);
  EXPECT_GT(add.first, triple.second) << "add started before triple ended";
  EXPECT_GT(sum.first, add.second) << "sum started before add ended";

  // And in the scheduler's events: every subtask of a stage completed before the first
  // subtask of the next one was placed.
  const std::vector<int> stage_rank{2, 1, 0};  // stage index -> position in the run
  std::vector<size_t> first_placed(3, events.size()), last_completed(3, 0);
  for (size_t i = 0; i < events.size(); ++i) {
    const int rank = stage_rank[events[i].second];
    if (events[i].first == SchedulerEvent::Kind::kPlaced) {
      first_placed[rank] = std::min(first_placed[rank], i);
    }
    if (events[i].first == SchedulerEvent::Kind::kCompleted) last_completed[rank] = i;
  }
  EXPECT_GT(first_placed[1], last_completed[0]);
  EXPECT_GT(first_placed[2], last_completed[1]);
  EXPECT_EQ(events.size(), 3u * 2u * 64u);  // 64 chunks per stage, placed + completed
  uint64_t expected = 0;
  for (uint32_t v : a) expected += static_cast<uint32_t>(4 * v);
  uint64_t total = 0;
  std::memcpy(&total, result->outputs.at("total").data, 8);
  EXPECT_EQ(total, expected);
}

TEST_F(StageRunnerTest, CN110955526B_MultiStage1GiBOn4GpusMatchesCpuLoop) {
  MakeGpus(4, 2048, ChunkConfig{});  // default 64 MiB chunks, 4 streams per GPU
  const int64_t n = kBigJobBytes / 4;
  std::unique_ptr<uint32_t[]> a(new uint32_t[n]);
  for (int64_t i = 0; i < n; ++i) a[i] = Value(static_cast<uint64_t>(i));
  std::vector<uint32_t> hist_out(64 * 2);  // 64 bins of uint64, the caller's destination
  JobSpec job;
  job.buffers = {{"a", {a.get(), kBigJobBytes}, /*cache=*/true},
                 {"scaled", {}, /*cache=*/true},
                 {"hist", {hist_out.data(), 64 * 8}}};
  KernelParams bins;
  bins.bins = 64;
  job.stages = {{"scale", "scale_u32", {5.0}, {"a"}, "scaled", {}, 4},
                {"sum", "sum_u32", {}, {"scaled"}, "total", {}, 4},
                {"histogram", "histogram_u32", bins, {"scaled"}, "hist", {}, 4}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();

  // The plain CPU loop.
  uint64_t sum = 0;
  std::vector<uint64_t> hist(64, 0);
  const auto* gathered = static_cast<const uint32_t*>(result->outputs.at("scaled").data);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t scaled = a[i] * 5u;
    mismatches += gathered[i] != scaled;
    sum += scaled;
    ++hist[(uint64_t{scaled} * 64) >> 32];
  }
  EXPECT_EQ(mismatches, 0);
  uint64_t total = 0;
  std::memcpy(&total, result->outputs.at("total").data, 8);
  EXPECT_EQ(total, sum);
  std::vector<uint64_t> got(64);
  std::memcpy(got.data(), hist_out.data(), 64 * 8);
  EXPECT_EQ(got, hist);
  // Locality: "a" was copied once (step 9); "scaled" stayed where it was computed, so the two
  // reduce stages copied nothing.
  EXPECT_EQ(result->stats.cached, kBigJobBytes / (64 * kMiB) + (kBigJobBytes % (64 * kMiB) ? 1 : 0));
  EXPECT_EQ(result->stats.bytes_h2d, kBigJobBytes);
  EXPECT_GT(result->stats.cache_hits, 0);
  for (auto& d : devices_) EXPECT_EQ(d->used_bytes(), 0u);  // the job's caches are freed
}

// Issue 42: with ChunkSplit::kSpreadOverGpus (the C ABI's default) a 64 MiB input runs on all 4
// GPUs, where the fixed 64 MiB chunk ran it on one. Each chunk's kernel waits until all four
// are running, so all hold streams at once and step (10) sends each to a GPU with the most free
// streams; with fewer than 4 chunks the wait ends at its bound and the test fails.
TEST_F(StageRunnerTest, CN110955526B_Step7_SpreadDefaultRuns64MiBOnAll4Gpus) {
  ChunkConfig config;
  config.split = ChunkSplit::kSpreadOverGpus;
  MakeGpus(4, 256, config);
  std::mutex mu;
  std::condition_variable all_running;
  int running = 0;
  std::set<int> gpus;
  Kernel hold = **kernels_->Find("scale_u32");
  hold.name = "hold_until_4_run";
  hold.native_run = nullptr;
  hold.run = [&, run = hold.run](const ChunkIo& io, const KernelParams& p) {
    {
      std::unique_lock lock(mu);
      ++running;
      all_running.notify_all();
      all_running.wait_for(lock, std::chrono::seconds(20), [&] { return running >= 4; });
    }
    return run(io, p);
  };
  ASSERT_TRUE(kernels_->Register(std::move(hold)).ok());
  scheduler_->SetObserver([&](const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::kPlaced) gpus.insert(e.gpu);  // under the scheduler's lock
  });
  const int64_t n = 64 * kMiB / 4;
  std::unique_ptr<uint32_t[]> a(new uint32_t[n]);
  for (int64_t i = 0; i < n; ++i) a[i] = Value(static_cast<uint64_t>(i));
  JobSpec job;
  job.buffers = {{"a", {a.get(), 64 * kMiB}}};
  job.stages = {{"scale", "hold_until_4_run", {3.0}, {"a"}, "out", {}}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stats.subtasks, 4);
  EXPECT_EQ(gpus, (std::set<int>{0, 1, 2, 3}));
  const auto* out = static_cast<const uint32_t*>(result->outputs.at("out").data);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) mismatches += out[i] != a[i] * 3u;
  EXPECT_EQ(mismatches, 0);
}

TEST_F(StageRunnerTest, UserKernelAndEmptyInput) {
  MakeGpus(1, 64, ChunkConfig{});
  Kernel count_odd;
  count_odd.name = "count_odd";
  count_odd.kind = KernelKind::kReduce;
  count_odd.result_bytes = [](const KernelParams&) { return int64_t{8}; };
  count_odd.run = [](const ChunkIo& io, const KernelParams&) {
    uint64_t c = 0;
    for (int64_t i = 0; i < io.in_bytes / 4; ++i) {
      uint32_t v;
      std::memcpy(&v, io.in0 + i * 4, 4);
      c += v & 1;
    }
    std::memcpy(io.out, &c, 8);
    return Status::Ok();
  };
  count_odd.combine = [](std::byte* acc, const std::byte* p, int64_t) {
    uint64_t x, y;
    std::memcpy(&x, acc, 8);
    std::memcpy(&y, p, 8);
    x += y;
    std::memcpy(acc, &x, 8);
  };
  ASSERT_TRUE(kernels_->Register(count_odd).ok());
  EXPECT_EQ(kernels_->Register(count_odd).code(), StatusCode::kAlreadyExists);
  std::vector<uint32_t> v{1, 2, 3, 5, 8};
  JobSpec job;
  job.buffers = {{"v", {v.data(), 20}}, {"none", {nullptr, 0}}};
  job.stages = {{"odd", "count_odd", {}, {"v"}, "n", {}}, {"zero", "sum_u32", {}, {"none"}, "z", {}}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  uint64_t odd = 0, zero = 1;
  std::memcpy(&odd, result->outputs.at("n").data, 8);
  std::memcpy(&zero, result->outputs.at("z").data, 8);
  EXPECT_EQ(odd, 3u);
  EXPECT_EQ(zero, 0u);
}

TEST(ChunkJob, BadJobsNameTheProblem) {
  auto kernels = KernelRegistry::WithBuiltins();
  uint32_t data[4] = {};
  auto plan = [&](JobSpec job) { return PlanJob(job, *kernels).status().message(); };
  JobSpec base;
  base.buffers = {{"a", {data, 16}}};
  JobSpec j = base;
  j.stages = {{"s", "fft", {}, {"a"}, "o", {}}};
  EXPECT_EQ(plan(j), "stage s: kernel: unknown kernel \"fft\"");
  j.stages = {{"x", "scale_u32", {}, {"y"}, "x_out", {}}, {"y", "scale_u32", {}, {"x_out"}, "y", {}}};
  EXPECT_EQ(plan(j), "stages: the dependency graph has a cycle through x, y");
  j.stages = {{"s", "scale_u32", {}, {"a"}, "o", {"t"}}, {"t", "scale_u32", {}, {"a"}, "p", {"s"}}};
  EXPECT_EQ(plan(j), "stages: the dependency graph has a cycle through s, t");
  j = base;
  j.buffers.push_back({"b", {nullptr, 8}});
  j.stages = {{"s", "vadd_u32", {}, {"a", "b"}, "o", {}}};
  EXPECT_EQ(plan(j), "buffers[b].data: null for an input of 8 bytes");
  j = base;
  j.stages = {{"s", "vadd_u32", {}, {"a"}, "o", {}}};
  EXPECT_EQ(plan(j), "stage s: inputs: kernel vadd_u32 takes 2, got 1");
  j.stages = {{"s", "scale_u32", {}, {"a"}, "o", {}, 0}};
  EXPECT_EQ(plan(j), "stage s: tasks: must be > 0, got 0");
  j.stages = {{"s", "scale_u32", {}, {"a"}, "o", {}}, {"t", "scale_u32", {}, {"a"}, "o", {}}};
  EXPECT_EQ(plan(j), "stage t: output \"o\" is already written by stage s");
  KernelParams zero_bins;
  zero_bins.bins = 0;
  j.stages = {{"h", "histogram_u32", zero_bins, {"a"}, "o", {}}};
  EXPECT_EQ(plan(j), "params.bins: must be in [1, 16777216], got 0");
}

// BufferSpec::keep: only a cached input with data is versioned by its caller.
TEST(ChunkJob, CN110955526B_Step9_OnlyCachedInputsCanBeKept) {
  auto kernels = KernelRegistry::WithBuiltins();
  uint32_t data[4] = {}, dest[4] = {};
  auto plan = [&](JobSpec job) { return PlanJob(job, *kernels).status().message(); };
  JobSpec j;
  j.stages = {{"s", "scale_u32", {}, {"a"}, "o", {}}};
  j.buffers = {{"a", {data, 16}, /*cache=*/false, /*keep=*/true}};
  EXPECT_EQ(plan(j), "buffers[a].keep: needs cache (only cached chunks are kept)");
  j.buffers = {{"a", {data, 16}, true, true}, {"o", {dest, 16}, true, true}};
  EXPECT_EQ(plan(j), "buffers[o].keep: stage s writes it; only inputs can be kept");
  j.buffers = {{"a", {data, 16}, true, true}, {"o", {nullptr, 0}, true, true}};
  EXPECT_EQ(plan(j), "buffers[o].keep: needs data (an input buffer)");
  j.buffers = {{"a", {data, 16}, true, true, 3}};
  EXPECT_EQ(plan(j), "");
}

// Kept chunks are found again by the next run only under the same address, size and version,
// and a run over another version of the same memory frees the stale ones.
TEST_F(StageRunnerTest, CN110955526B_Step9_KeptChunksAreFoundByAddressSizeAndVersion) {
  MakeGpus(2, 64, ChunkConfig{.chunk_bytes = 4 * kMiB});
  std::vector<uint32_t> a(8 * kMiB / 4, 3);  // two 4 MiB chunks
  auto run = [&](uint64_t version) {
    JobSpec job;
    job.buffers = {{"a", {a.data(), 8 * kMiB}, true, true, version}};
    job.stages = {{"sum", "sum_u32", {}, {"a"}, "total", {}}};
    auto result = runner_->Run(job);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    uint64_t total = 0;
    std::memcpy(&total, result->outputs.at("total").data, 8);
    EXPECT_EQ(total, uint64_t{3} * (8 * kMiB / 4));
    return result->stats;
  };
  EXPECT_EQ(run(1).bytes_h2d, 8 * kMiB);
  const ChunkStats again = run(1);
  EXPECT_EQ(again.bytes_h2d, 0);
  EXPECT_EQ(again.cache_hits, 2);
  uint64_t resident = 0;
  for (auto& d : devices_) resident += d->used_bytes();
  EXPECT_EQ(resident, uint64_t{8 * kMiB});  // one copy: version 1's
  EXPECT_EQ(run(2).bytes_h2d, 8 * kMiB);    // another version: copied again...
  resident = 0;
  for (auto& d : devices_) resident += d->used_bytes();
  EXPECT_EQ(resident, uint64_t{8 * kMiB});  // ...and version 1's copy freed
  EXPECT_EQ(runner_->ForgetKept(a.data()), 1);
  for (auto& d : devices_) EXPECT_EQ(d->used_bytes(), 0u);
  EXPECT_EQ(runner_->ForgetKept(a.data()), 0);
}

TEST(ChunkKernels, BuiltinsComputeOnSmallArrays) {
  auto kernels = KernelRegistry::WithBuiltins();
  EXPECT_EQ(kernels->Names(), (std::vector<std::string>{"histogram_u32", "scale_f32", "scale_u32",
                                                       "sum_u32", "vadd_f32", "vadd_u32"}));
  float x[3] = {1.5f, -2.0f, 4.0f}, y[3] = {0.5f, 1.0f, 1.0f}, out[3];
  ChunkIo io{reinterpret_cast<const std::byte*>(x), reinterpret_cast<const std::byte*>(y), 12,
             reinterpret_cast<std::byte*>(out), 12};
  ASSERT_TRUE((*kernels->Find("vadd_f32"))->run(io, {}).ok());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], -1.0f);
  ASSERT_TRUE((*kernels->Find("scale_f32"))->run(io, {0.5}).ok());
  EXPECT_EQ(out[2], 2.0f);
  uint32_t v[4] = {0, 0x40000000u, 0x80000000u, 0xFFFFFFFFu};
  uint64_t h[4] = {};
  ChunkIo hio{reinterpret_cast<const std::byte*>(v), nullptr, 16, reinterpret_cast<std::byte*>(h), 32};
  KernelParams four;
  four.bins = 4;
  ASSERT_TRUE((*kernels->Find("histogram_u32"))->run(hio, four).ok());
  EXPECT_EQ(h[0], 1u);
  EXPECT_EQ(h[1], 1u);
  EXPECT_EQ(h[2], 1u);
  EXPECT_EQ(h[3], 1u);
}

// StageSpec::tasks: the stage's chunks are cut into that many contiguous tasks; with 2 free
// CPUs, 6 tasks run in 3 waves, and no chunk of a wave starts before the last wave ended.
TEST_F(StageRunnerTest, CN110955526B_Claim2_TasksRunInWavesOfFreeCpus) {
  ChunkConfig config;
  config.chunk_bytes = 4096;
  config.free_cpus = 2;
  MakeGpus(2, 64, config);
  std::vector<uint32_t> a(64 * 1024);  // 64 chunks
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i);
  std::mutex mu;
  std::vector<std::pair<SchedulerEvent::Kind, int64_t>> events;
  scheduler_->SetObserver([&](const SchedulerEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back({e.kind, e.key.index});
  });
  JobSpec job;
  job.buffers = {{"a", {a.data(), static_cast<int64_t>(a.size() * 4)}}};
  job.stages = {{"triple", "scale_u32", {3.0}, {"a"}, "b", {}, 6}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->gpu_tasks, 6);
  EXPECT_EQ(result->cpu_tasks, 0);
  EXPECT_EQ(result->task_waves, 3);
  // Tasks of 10 or 11 chunks: waves start at chunks 0, 21 and 42.
  for (int64_t wave_start : {21, 42}) {
    size_t first_placed = events.size(), last_completed_before = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      const auto [kind, chunk] = events[i];
      if (kind == SchedulerEvent::Kind::kPlaced && chunk >= wave_start) first_placed = std::min(first_placed, i);
      if (kind == SchedulerEvent::Kind::kCompleted && chunk < wave_start) last_completed_before = i;
    }
    EXPECT_GT(first_placed, last_completed_before) << "wave at chunk " << wave_start;
  }
  const auto* b = static_cast<const uint32_t*>(result->outputs.at("b").data);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(b[i], 3 * a[i]) << i;

  // More tasks than chunks: one task per chunk.
  job.stages[0].tasks = 1000;
  auto capped = runner_->Run(job);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped->gpu_tasks, 64);
  EXPECT_EQ(capped->task_waves, 32);
}

// Claim 2 per stage, on 2 MiB GPUs with 1 MiB chunks: scale (1 MiB in + 1 MiB out) and sum
// (1 MiB in + 8 bytes out) go to the GPU executor; vadd (two inputs and an output, 3 MiB) fits no GPU and goes to the CPU executor
// instead of waiting for memory that never comes.
TEST_F(StageRunnerTest, CN110955526B_Claim2_NoGpuMemoryRunsTasksOnCpuExecutor) {
  ChunkConfig config;
  config.chunk_bytes = kMiB;
  config.idle_wait_ms = 5;
  MakeGpus(2, 2, config);
  std::vector<uint32_t> a(kMiB);  // 4 MiB: 4 chunks
  for (size_t i = 0; i < a.size(); ++i) a[i] = Value(i);
  JobSpec job;
  job.buffers = {{"a", {a.data(), static_cast<int64_t>(a.size() * 4)}}};
  job.stages = {{"triple", "scale_u32", {3.0}, {"a"}, "b", {}, 2},
                {"add", "vadd_u32", {}, {"a", "b"}, "c", {}, 3},
                {"sum", "sum_u32", {}, {"c"}, "total", {}, 1}};
  auto result = runner_->Run(job);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->gpu_tasks, 2 + 1);
  EXPECT_EQ(result->cpu_tasks, 3);
  EXPECT_EQ(result->stats.cpu_runs, 4);                // the add stage's 4 chunks
  EXPECT_EQ(result->stats.bytes_h2d, 4 * kMiB * 2);    // scale's and sum's inputs only
  uint64_t want = 0, got = 0;
  for (uint32_t v : a) want += static_cast<uint32_t>(4 * v);
  std::memcpy(&got, result->outputs.at("total").data, 8);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace gpusched::chunks
