#include <cuda_runtime.h>

#include "dispatch/cuda/cuda_kernels.h"

namespace gpusched::dispatch::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops over at most this many blocks: enough to fill any current GPU.
constexpr int64_t kMaxBlocks = 4096;
// Histograms with at most this many bins count in shared memory first (4 bytes a bin).
constexpr int64_t kSharedBins = 8192;

unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

cudaStream_t Native(void* s) { return static_cast<cudaStream_t>(s); }

int LastError() { return static_cast<int>(cudaGetLastError()); }

__device__ int64_t First() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t Stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void ScaleInPlace(float* data, int64_t n, float factor) {
  for (int64_t i = First(); i < n; i += Stride()) data[i] *= factor;
}

template <typename T>
__global__ void Scale(const T* in, T* out, int64_t n, T factor) {
  for (int64_t i = First(); i < n; i += Stride()) out[i] = in[i] * factor;
}

template <typename T>
__global__ void Vadd(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Stride()) out[i] = a[i] + b[i];
}

// Each thread sums its grid-stride slice, the block folds the thread sums in shared memory,
// and one atomic per block adds it to *out. Integer addition: any order gives the same result.
__global__ void SumU32(const uint32_t* in, int64_t n, unsigned long long* out) {
  __shared__ unsigned long long partial[kThreads];
  unsigned long long sum = 0;
  for (int64_t i = First(); i < n; i += Stride()) sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

__device__ int64_t Bin(uint32_t v, unsigned long long bins) {
  return static_cast<int64_t>((static_cast<unsigned long long>(v) * bins) >> 32);
}

__global__ void HistogramShared(const uint32_t* in, int64_t n, int64_t bins,
                                unsigned long long* out) {
  extern __shared__ unsigned int counts[];
  for (int64_t b = threadIdx.x; b < bins; b += blockDim.x) counts[b] = 0;
  __syncthreads();
  for (int64_t i = First(); i < n; i += Stride()) atomicAdd(&counts[Bin(in[i], bins)], 1u);
  __syncthreads();
  for (int64_t b = threadIdx.x; b < bins; b += blockDim.x) {
    if (counts[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(counts[b]));
  }
}

__global__ void HistogramGlobal(const uint32_t* in, int64_t n, int64_t bins,
                                unsigned long long* out) {
  for (int64_t i = First(); i < n; i += Stride()) atomicAdd(&out[Bin(in[i], bins)], 1ull);
}

}  // namespace

int LaunchScaleKernel(float* data, int64_t n, float factor, void* stream) {
  if (n <= 0) return 0;
  ScaleInPlace<<<Blocks(n), kThreads, 0, Native(stream)>>>(data, n, factor);
  return LastError();
}

int LaunchScaleF32(const float* in, float* out, int64_t n, float factor, void* stream) {
  if (n <= 0) return 0;
  Scale<float><<<Blocks(n), kThreads, 0, Native(stream)>>>(in, out, n, factor);
  return LastError();
}

int LaunchScaleU32(const uint32_t* in, uint32_t* out, int64_t n, uint32_t factor, void* stream) {
  if (n <= 0) return 0;
  Scale<uint32_t><<<Blocks(n), kThreads, 0, Native(stream)>>>(in, out, n, factor);
  return LastError();
}

int LaunchVaddF32(const float* a, const float* b, float* out, int64_t n, void* stream) {
  if (n <= 0) return 0;
  Vadd<float><<<Blocks(n), kThreads, 0, Native(stream)>>>(a, b, out, n);
  return LastError();
}

int LaunchVaddU32(const uint32_t* a, const uint32_t* b, uint32_t* out, int64_t n, void* stream) {
  if (n <= 0) return 0;
  Vadd<uint32_t><<<Blocks(n), kThreads, 0, Native(stream)>>>(a, b, out, n);
  return LastError();
}

int LaunchSumU32(const uint32_t* in, int64_t n, uint64_t* out, void* stream) {
  if (cudaError_t e = cudaMemsetAsync(out, 0, sizeof(uint64_t), Native(stream)); e != cudaSuccess) {
    return static_cast<int>(e);
  }
  if (n <= 0) return 0;
  SumU32<<<Blocks(n), kThreads, 0, Native(stream)>>>(
      in, n, reinterpret_cast<unsigned long long*>(out));
  return LastError();
}

int LaunchHistogramU32(const uint32_t* in, int64_t n, int64_t bins, uint64_t* out, void* stream) {
  if (bins < 1) return static_cast<int>(cudaErrorInvalidValue);
  const size_t bytes = static_cast<size_t>(bins) * sizeof(uint64_t);
  if (cudaError_t e = cudaMemsetAsync(out, 0, bytes, Native(stream)); e != cudaSuccess) {
    return static_cast<int>(e);
  }
  if (n <= 0) return 0;
  auto* counts = reinterpret_cast<unsigned long long*>(out);
  if (bins <= kSharedBins) {
    HistogramShared<<<Blocks(n), kThreads, static_cast<size_t>(bins) * sizeof(unsigned int),
                      Native(stream)>>>(in, n, bins, counts);
  } else {
    HistogramGlobal<<<Blocks(n), kThreads, 0, Native(stream)>>>(in, n, bins, counts);
  }
  return LastError();
}

}  // namespace gpusched::dispatch::cuda
