#pragma once
// CudaDevice: the Device interface over the CUDA runtime (cudart): cudaMalloc/cudaFree with
// the same accounting as SimDevice (capacity = the GPU's total memory unless capped), a fixed
// set of cudaStreams, cudaMemcpyAsync, and kernels that enqueue real CUDA work on the stream.
// Built only when nvcc is found (GPUSCHED_CUDA); see device.h for the contract.
//
// Thread-safety: all methods are thread-safe.

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "dispatch/device.h"

namespace gpusched::dispatch {

class CudaDevice final : public Device {
 public:
  // Number of CUDA devices visible; 0 when there is no driver or no GPU.
  static int DeviceCount();
  // The same, or Unavailable naming why none is usable: cudaGetDeviceCount's error (no
  // libcuda.so.1, a driver too old for this runtime, no GPU).
  static StatusOr<int> Probe();
  // Opens device `index` with `streams` streams; `memory_cap_mib` > 0 caps the accounted
  // capacity below the GPU's memory. Unavailable when the device cannot be opened.
  static StatusOr<std::unique_ptr<CudaDevice>> Open(int index, int streams,
                                                    MiB memory_cap_mib = 0);
  ~CudaDevice() override;

  int index() const override { return index_; }
  std::string name() const override { return name_; }
  StatusOr<void*> Allocate(size_t bytes) override;
  Status Free(void* ptr) override;
  size_t total_bytes() const override { return total_bytes_; }
  size_t used_bytes() const override;
  int stream_count() const override { return static_cast<int>(streams_.size()); }
  int free_streams() const override;
  StatusOr<StreamId> AcquireStream() override;
  Status ReleaseStream(StreamId stream) override;
  Status CopyToDevice(StreamId stream, void* device_dst, const void* host_src,
                      size_t bytes) override;
  Status CopyToHost(StreamId stream, void* host_dst, const void* device_src,
                    size_t bytes) override;
  Status Launch(StreamId stream, Kernel kernel) override;
  Status Synchronize(StreamId stream) override;
  Status SynchronizeAll() override;
  // cudaHostRegister (portable: every device's copies see it pinned). A range that is already
  // registered, by this process or in part, is reported as FailedPrecondition and left alone.
  StatusOr<bool> PinHost(void* ptr, size_t bytes) override;
  Status UnpinHost(void* ptr) override;

 private:
  CudaDevice(int index, std::string name, size_t total_bytes, std::vector<void*> streams);
  Status CheckStream(StreamId stream) const;

  const int index_;
  const std::string name_;
  const size_t total_bytes_;
  const std::vector<void*> streams_;  // cudaStream_t

  mutable std::mutex mu_;
  std::vector<bool> acquired_;
  std::unordered_map<void*, size_t> allocations_;
  size_t used_bytes_ = 0;
};

}  // namespace gpusched::dispatch
