#include <cuda_runtime.h>

#include "dispatch/cuda/cuda_kernels.h"

namespace gpusched::dispatch::cuda {
namespace {

__global__ void ScaleKernel(float* data, int64_t n, float factor) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

}  // namespace

int LaunchScaleKernel(float* data, int64_t n, float factor, void* stream) {
  if (n <= 0) return 0;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  ScaleKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(data, n, factor);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gpusched::dispatch::cuda
