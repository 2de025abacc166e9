#pragma once
// CUDA implementations of the built-in chunk kernels (Kernel::native_run), over the launchers
// of dispatch/cuda/cuda_kernels.h. Built only with the CUDA backend (target
// gpusched::chunks_cuda). A registry from WithCudaBuiltins() runs the built-ins on
// CudaDevices and, unchanged, on SimDevices and the CPU.

#include <memory>

#include "dispatch/chunks/kernels.h"

namespace gpusched::chunks {

// Sets `kernel.native_run` when `kernel` is a built-in with a CUDA implementation.
void AddCudaImplementation(Kernel& kernel);

// KernelRegistry::WithBuiltins() with AddCudaImplementation applied to each built-in.
std::unique_ptr<KernelRegistry> WithCudaBuiltins();

}  // namespace gpusched::chunks
