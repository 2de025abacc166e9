#include "dispatch/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <vector>

#include "dispatch/cuda/cuda_kernels.h"

namespace gpusched::dispatch {
namespace {

TEST(CudaDeviceTest, CopyScaleCopyBackOnARealGpu) {
  if (CudaDevice::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto dev = CudaDevice::Open(0, 2, 64);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  const size_t bytes = host.size() * sizeof(float);
  void* buf = *(*dev)->Allocate(bytes);
  EXPECT_EQ((*dev)->used_bytes(), bytes);
  StreamId s = *(*dev)->AcquireStream();
  ASSERT_TRUE((*dev)->CopyToDevice(s, buf, host.data(), bytes).ok());
  ASSERT_TRUE((*dev)->Launch(s, [&](const KernelContext& ctx) {
                  EXPECT_EQ(cuda::LaunchScaleKernel(static_cast<float*>(buf), 1000, 3.0f,
                                                    ctx.native_stream), 0);
                }).ok());
  ASSERT_TRUE((*dev)->CopyToHost(s, host.data(), buf, bytes).ok());
  ASSERT_TRUE((*dev)->Synchronize(s).ok());
  for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i], 3.0f * static_cast<float>(i));
  EXPECT_TRUE((*dev)->Free(buf).ok());
  EXPECT_EQ((*dev)->used_bytes(), 0u);
  EXPECT_EQ((*dev)->Allocate(65ull << 20).status().code(), StatusCode::kResourceExhausted);
}

TEST(CudaDeviceTest, OpenFailsCleanlyWithoutDevice) {
  auto dev = CudaDevice::Open(CudaDevice::DeviceCount(), 1);
  EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpusched::dispatch
