#include "dispatch/chunks/cuda_builtins.h"

#include <string>

#include "dispatch/cuda/cuda_kernels.h"

namespace gpusched::chunks {
namespace {

namespace cu = dispatch::cuda;

Status Launched(int error, const char* what) {
  if (error == 0) return Status::Ok();
  return Internal(std::string(what) + ": CUDA error " + std::to_string(error));
}

template <typename T>
const T* In0(const ChunkIo& io) { return reinterpret_cast<const T*>(io.in0); }
template <typename T>
const T* In1(const ChunkIo& io) { return reinterpret_cast<const T*>(io.in1); }
template <typename T>
T* Out(const ChunkIo& io) { return reinterpret_cast<T*>(io.out); }
int64_t Count(const ChunkIo& io) { return io.in_bytes / 4; }  // every built-in has 4-byte elements

}  // namespace

void AddCudaImplementation(Kernel& k) {
  const std::string& n = k.name;
  if (n == "scale_f32") {
    k.native_run = [](const ChunkIo& io, const KernelParams& p, void* s) {
      return Launched(cu::LaunchScaleF32(In0<float>(io), Out<float>(io), Count(io),
                                         static_cast<float>(p.scalar), s), "scale_f32");
    };
  } else if (n == "scale_u32") {
    k.native_run = [](const ChunkIo& io, const KernelParams& p, void* s) {
      // The same truncation as the CPU kernel.
      const auto factor = static_cast<uint32_t>(static_cast<int64_t>(p.scalar));
      return Launched(cu::LaunchScaleU32(In0<uint32_t>(io), Out<uint32_t>(io), Count(io), factor, s),
                      "scale_u32");
    };
  } else if (n == "vadd_f32") {
    k.native_run = [](const ChunkIo& io, const KernelParams&, void* s) {
      return Launched(cu::LaunchVaddF32(In0<float>(io), In1<float>(io), Out<float>(io), Count(io), s),
                      "vadd_f32");
    };
  } else if (n == "vadd_u32") {
    k.native_run = [](const ChunkIo& io, const KernelParams&, void* s) {
      return Launched(cu::LaunchVaddU32(In0<uint32_t>(io), In1<uint32_t>(io), Out<uint32_t>(io),
                                        Count(io), s), "vadd_u32");
    };
  } else if (n == "sum_u32") {
    k.native_run = [](const ChunkIo& io, const KernelParams&, void* s) {
      return Launched(cu::LaunchSumU32(In0<uint32_t>(io), Count(io), Out<uint64_t>(io), s), "sum_u32");
    };
  } else if (n == "histogram_u32") {
    k.native_run = [](const ChunkIo& io, const KernelParams& p, void* s) {
      return Launched(cu::LaunchHistogramU32(In0<uint32_t>(io), Count(io), p.bins, Out<uint64_t>(io), s),
                      "histogram_u32");
    };
  }
}

std::unique_ptr<KernelRegistry> WithCudaBuiltins() {
  return KernelRegistry::WithBuiltins(AddCudaImplementation);
}

}  // namespace gpusched::chunks
