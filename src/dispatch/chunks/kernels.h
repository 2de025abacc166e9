#pragma once
// KernelRegistry: the work a chunk subtask runs, by name. Built-in kernels cover map-style
// (vector add, scale) and reduce-style (sum, histogram) work; users register their own.
//
// A kernel's `run` is its CPU implementation: the simulated device executes it on the chunk's
// device copy (which lives in host memory), and the CPU fallback of step (10-8)/(10-9) runs it
// on the host buffer directly. Map kernels write one output element per input element; reduce
// kernels write a fixed-size partial per chunk that `combine` folds into the stage result.
//
// Thread-safety: Register and Find may be called from any thread; a Kernel* from Find stays
// valid for the registry's lifetime.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched::chunks {

enum class KernelKind { kMap, kReduce };

struct KernelParams {
  double scalar = 1.0;         // scale kernels: the factor (scale_u32 truncates it to uint32)
  int64_t bins = 256;          // histogram kernels: number of equal-width bins
  const void* user = nullptr;  // passed through to user kernels
};

// One chunk's buffers as a kernel sees them. in1 is null for one-input kernels.
struct ChunkIo {
  const std::byte* in0 = nullptr;
  const std::byte* in1 = nullptr;
  int64_t in_bytes = 0;
  std::byte* out = nullptr;
  int64_t out_bytes = 0;
};

struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::kMap;
  int inputs = 1;             // 1 or 2
  int64_t element_bytes = 4;  // chunks never split an element
  // Reduce only: bytes of one partial (and of the stage's result) for these params.
  std::function<int64_t(const KernelParams&)> result_bytes;
  // A failure (a user kernel's status) fails the chunk subtask and so the job, the error naming
  // the kernel; the built-ins never fail.
  std::function<Status(const ChunkIo&, const KernelParams&)> run;
  // Optional: enqueues the kernel on a native (CUDA) stream, for devices whose buffers the CPU
  // cannot read; an error names the failed launch. A kernel without it runs only on the
  // simulated devices and the CPU. The built-ins get theirs from chunks/cuda_builtins.h.
  std::function<Status(const ChunkIo&, const KernelParams&, void* native_stream)> native_run;
  // Reduce only: acc <- acc (+) partial, both `bytes` long. Must be associative and
  // commutative, so the result does not depend on which chunk finishes first.
  std::function<void(std::byte* acc, const std::byte* partial, int64_t bytes)> combine;
};

class KernelRegistry {
 public:
  // An empty registry. WithBuiltins() has vadd_u32, scale_u32, vadd_f32, scale_f32, sum_u32
  // and histogram_u32; `extend`, when set, is called on each before it is registered (to add
  // native implementations, see cuda_builtins.h).
  KernelRegistry() = default;
  static std::unique_ptr<KernelRegistry> WithBuiltins(
      const std::function<void(Kernel&)>& extend = {});

  // Errors: a missing name/run, inputs not 1 or 2, element_bytes <= 0, a reduce kernel without
  // result_bytes/combine, or a name already registered.
  Status Register(Kernel kernel);
  // NotFound naming the kernel when it is not registered.
  StatusOr<const Kernel*> Find(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Kernel>> kernels_;
};

// Validates params for `kernel` (histogram bins > 0); names the field and value.
Status ValidateParams(const Kernel& kernel, const KernelParams& params);

}  // namespace gpusched::chunks
