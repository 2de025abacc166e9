#pragma once
// Real CUDA kernels for the CUDA backend, callable from plain C++ (no CUDA headers needed).
// `stream` is a cudaStream_t passed as void* (KernelContext::native_stream). Pointers are
// device pointers (cudaMalloc'd, so aligned for every element type). Every launcher enqueues
// its work asynchronously on `stream` and returns 0 on a successful launch, else the
// cudaError_t value. n <= 0 enqueues nothing (reduce launchers still zero their output).
//
// The results equal the CPU kernels of chunks/kernels.cc bit for bit: the map kernels do the
// same single IEEE operation per element, and the reductions are integer (uint64 sums and
// counts), so their order does not matter.

#include <cstdint>

namespace gpusched::dispatch::cuda {

// data[i] *= factor.
int LaunchScaleKernel(float* data, int64_t n, float factor, void* stream);

// out[i] = in[i] * factor (float, like scale_f32).
int LaunchScaleF32(const float* in, float* out, int64_t n, float factor, void* stream);
// out[i] = in[i] * factor modulo 2^32 (scale_u32).
int LaunchScaleU32(const uint32_t* in, uint32_t* out, int64_t n, uint32_t factor, void* stream);
// out[i] = a[i] + b[i] (vadd_f32).
int LaunchVaddF32(const float* a, const float* b, float* out, int64_t n, void* stream);
// out[i] = a[i] + b[i] modulo 2^32 (vadd_u32).
int LaunchVaddU32(const uint32_t* a, const uint32_t* b, uint32_t* out, int64_t n, void* stream);
// *out = sum of in[0..n) as uint64 (sum_u32); zeroes *out first.
int LaunchSumU32(const uint32_t* in, int64_t n, uint64_t* out, void* stream);
// out[0..bins) = counts of in[0..n) in equal-width bins over the uint32 range, bin =
// value * bins / 2^32 (histogram_u32); zeroes out first. REQUIRES: bins >= 1.
int LaunchHistogramU32(const uint32_t* in, int64_t n, int64_t bins, uint64_t* out, void* stream);

}  // namespace gpusched::dispatch::cuda
