// The CUDA implementations of the built-in kernels: each runs on real GPUs (H2D copy, kernel,
// D2H copy on a CudaDevice stream) through the stage runner and must equal the CPU kernels on
// simulated devices, bit for bit. Skips without a GPU; the registry checks run everywhere.

#include "dispatch/chunks/cuda_builtins.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "dispatch/chunks/stage_runner.h"
#include "dispatch/cuda/cuda_device.h"
#include "dispatch/sim_device.h"

namespace gpusched::chunks {
namespace {

uint32_t Value(uint64_t i) {  // deterministic data over the whole uint32 range
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

// 3 MiB + 12 bytes: three full 1 MiB chunks and a short tail.
constexpr int64_t kElements = (3 * kMiB + 12) / 4;

struct Inputs {
  std::vector<uint32_t> a, b;
  std::vector<float> fa, fb;
  Inputs() : a(kElements), b(kElements), fa(kElements), fb(kElements) {
    for (int64_t i = 0; i < kElements; ++i) {
      a[i] = Value(i);
      b[i] = Value(i + kElements);
      fa[i] = static_cast<float>(static_cast<int32_t>(a[i] % 20001) - 10000) / 7.0f;
      fb[i] = static_cast<float>(b[i] % 1000) * 0.001f;
    }
  }
};

JobSpec Job(Inputs& in, const std::string& kernel, const KernelParams& params, int tasks) {
  const bool f32 = kernel.find("f32") != std::string::npos;
  JobSpec job;
  job.buffers.push_back({"a", {f32 ? static_cast<void*>(in.fa.data()) : in.a.data(), kElements * 4}});
  job.buffers.push_back({"b", {f32 ? static_cast<void*>(in.fb.data()) : in.b.data(), kElements * 4}});
  StageSpec st;
  st.name = "s";
  st.kernel = kernel;
  st.params = params;
  st.inputs = {"a"};
  if (kernel.rfind("vadd", 0) == 0) st.inputs.push_back("b");
  st.output = "out";
  st.tasks = tasks;
  job.stages.push_back(st);
  return job;
}

// Runs `kernel` on `devices` and returns its output bytes and the job's result.
std::vector<std::byte> RunOn(std::vector<dispatch::Device*> devices, const KernelRegistry& kernels,
                             Inputs& in, const std::string& kernel, const KernelParams& params,
                             JobResult* out = nullptr) {
  RealClock clock;
  ChunkConfig config;
  config.chunk_bytes = kMiB;
  ChunkScheduler scheduler(devices, config, clock);
  ThreadPool pool(devices.size() * 4);
  StageRunner runner(scheduler, kernels, pool);
  std::vector<std::string> log;
  runner.SetLog([&](const std::string& line) { log.push_back(line); });
  StatusOr<JobResult> r = runner.Run(Job(in, kernel, params, 3));
  EXPECT_TRUE(r.ok()) << kernel << ": " << r.status().ToString();
  if (!r.ok()) return {};
  for (const std::string& line : log) ADD_FAILURE() << kernel << ": " << line;
  const HostBuffer& o = r->outputs.at("out");
  std::vector<std::byte> bytes(static_cast<size_t>(o.bytes));
  std::memcpy(bytes.data(), o.data, bytes.size());
  if (out != nullptr) *out = std::move(*r);
  return bytes;
}

TEST(CudaBuiltinsTest, EveryBuiltinHasACudaImplementation) {
  auto kernels = WithCudaBuiltins();
  for (const std::string& name : kernels->Names()) {
    EXPECT_TRUE((*kernels->Find(name))->native_run) << name;
  }
  EXPECT_EQ(kernels->Names().size(), 6u);
  // Without the extension the built-ins stay CPU-only.
  EXPECT_FALSE((*KernelRegistry::WithBuiltins()->Find("sum_u32"))->native_run);
}

// The GPU test's harness on simulated devices, where native_run is not used: the registry
// with CUDA implementations computes what the CPU loop does.
TEST(CudaBuiltinsTest, RegistryWithCudaImplementationsRunsOnSimulatedDevices) {
  FakeClock clock{0, true};
  dispatch::SimDevice sim(dispatch::SimDeviceOptions{0, "", 64, 4}, clock);
  auto kernels = WithCudaBuiltins();
  Inputs in;
  KernelParams scale;
  scale.scalar = 3.0;
  const auto scaled = RunOn({&sim}, *kernels, in, "scale_u32", scale);
  ASSERT_EQ(scaled.size(), static_cast<size_t>(kElements * 4));
  const auto sum = RunOn({&sim}, *kernels, in, "sum_u32", {});
  ASSERT_EQ(sum.size(), 8u);
  uint64_t got = 0, want = 0;
  std::memcpy(&got, sum.data(), 8);
  for (int64_t i = 0; i < kElements; ++i) {
    uint32_t v = 0;
    std::memcpy(&v, scaled.data() + i * 4, 4);
    ASSERT_EQ(v, in.a[i] * 3u) << i;
    want += in.a[i];
  }
  EXPECT_EQ(got, want);
}

class CudaBuiltinsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int n = dispatch::CudaDevice::DeviceCount();
    if (n == 0) GTEST_SKIP() << "no CUDA device";
    for (int i = 0; i < std::min(n, 2); ++i) {
      auto dev = dispatch::CudaDevice::Open(i, 4, 512);
      ASSERT_TRUE(dev.ok()) << dev.status().ToString();
      gpus_.push_back(std::move(*dev));
      sims_.push_back(std::make_unique<dispatch::SimDevice>(
          dispatch::SimDeviceOptions{i, "", 512, 4}, clock_));
    }
  }
  std::vector<dispatch::Device*> Gpus() {
    std::vector<dispatch::Device*> r;
    for (auto& g : gpus_) r.push_back(g.get());
    return r;
  }
  std::vector<dispatch::Device*> Sims() {
    std::vector<dispatch::Device*> r;
    for (auto& s : sims_) r.push_back(s.get());
    return r;
  }

  RealClock clock_;
  std::vector<std::unique_ptr<dispatch::CudaDevice>> gpus_;
  std::vector<std::unique_ptr<dispatch::SimDevice>> sims_;
  std::unique_ptr<KernelRegistry> cuda_ = WithCudaBuiltins();
  std::unique_ptr<KernelRegistry> cpu_ = KernelRegistry::WithBuiltins();
  Inputs in_;
};

TEST_F(CudaBuiltinsGpuTest, EveryBuiltinOnTheGpuEqualsTheCpuKernel) {
  struct Case {
    std::string kernel;
    KernelParams params;
  };
  KernelParams scale;
  scale.scalar = 3.0;
  KernelParams fscale;
  fscale.scalar = -1.75;
  KernelParams bins16;
  bins16.bins = 16;
  KernelParams bins_big;  // more bins than fit in shared memory: the global-memory kernel
  bins_big.bins = 100'000;
  for (const Case& c : {Case{"vadd_u32", {}}, Case{"scale_u32", scale}, Case{"vadd_f32", {}},
                        Case{"scale_f32", fscale}, Case{"sum_u32", {}}, Case{"histogram_u32", {}},
                        Case{"histogram_u32", bins16}, Case{"histogram_u32", bins_big}}) {
    JobResult gpu_result;
    const auto on_gpu = RunOn(Gpus(), *cuda_, in_, c.kernel, c.params, &gpu_result);
    const auto on_cpu = RunOn(Sims(), *cpu_, in_, c.kernel, c.params);
    ASSERT_FALSE(on_gpu.empty()) << c.kernel;
    EXPECT_EQ(on_gpu, on_cpu) << c.kernel << " bins " << c.params.bins;
    EXPECT_EQ(gpu_result.stats.cpu_runs, 0) << c.kernel;
    EXPECT_GT(gpu_result.stats.bytes_h2d, 0) << c.kernel;
  }
}

TEST_F(CudaBuiltinsGpuTest, SumIsExactAndHostBuffersArePinned) {
  JobResult r;
  const auto bytes = RunOn(Gpus(), *cuda_, in_, "sum_u32", {}, &r);
  ASSERT_EQ(bytes.size(), 8u);
  uint64_t got = 0, want = 0;
  std::memcpy(&got, bytes.data(), 8);
  for (uint32_t v : in_.a) want += v;
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.gpu_tasks, 3);
  EXPECT_GE(r.pinned_bytes, kElements * 4 * 2);  // both inputs (each over 1 MiB)
  EXPECT_EQ(r.pin_failures, 0);
  for (auto& g : gpus_) EXPECT_EQ(g->used_bytes(), 0u);
}

TEST_F(CudaBuiltinsGpuTest, CpuOnlyKernelReportsItsName) {
  JobSpec job = Job(in_, "sum_u32", {}, 1);
  RealClock clock;
  ChunkConfig config;
  config.chunk_bytes = kMiB;
  ChunkScheduler scheduler(Gpus(), config, clock);
  ThreadPool pool(4);
  StageRunner runner(scheduler, *cpu_, pool);
  StatusOr<JobResult> r = runner.Run(job);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sum_u32: has no native (CUDA) implementation"),
            std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace gpusched::chunks
