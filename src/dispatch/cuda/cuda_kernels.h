#pragma once
// Real CUDA kernels for the CUDA backend, callable from plain C++ (no CUDA headers needed).
// `stream` is a cudaStream_t passed as void* (KernelContext::native_stream).

#include <cstdint>

namespace gpusched::dispatch::cuda {

// Multiplies data[0..n) by `factor` on the device, asynchronously on `stream`.
// Returns 0 on a successful launch, else the cudaError_t value.
int LaunchScaleKernel(float* data, int64_t n, float factor, void* stream);

}  // namespace gpusched::dispatch::cuda
