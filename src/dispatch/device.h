#pragma once
// Device: one GPU as gpusched's node-level code sees it. Two backends implement it: SimDevice
// (sim_device.h: host memory, CPU worker threads, used by tests, CI and benchmarks) and
// CudaDevice (cuda/cuda_device.h: the CUDA runtime, built only when nvcc is found).
//
// The model is CUDA's: device memory is allocated and freed explicitly and accounted against a
// capacity; work (copies and kernels) is enqueued on a stream and runs asynchronously, in order
// within a stream and concurrently across streams; Synchronize waits for a stream to drain.
// Streams are a counted resource: AcquireStream hands out a free one (CN110955526B step 10
// schedules by free streams), ReleaseStream gives it back.
//
// Units: bytes for buffers (allocations have arbitrary sizes); helpers convert to MiB.
// Thread-safety: every method may be called from any thread. A stream should be driven by the
// thread that acquired it; enqueueing on one stream from several threads is allowed but their
// relative order is then whatever order the calls happened in.

#include <cstddef>
#include <functional>
#include <string>

#include "base/status.h"
#include "base/units.h"

namespace gpusched::dispatch {

using StreamId = int;

// What a kernel sees when it runs.
struct KernelContext {
  int device_index = 0;
  StreamId stream = 0;
  // The backend's native stream: a cudaStream_t for CudaDevice, nullptr for SimDevice.
  void* native_stream = nullptr;
};

// A unit of work launched on a stream.
// - SimDevice runs it on the stream's worker thread, after everything enqueued before it on that
//   stream; it computes directly on device buffers (which are host memory).
// - CudaDevice calls it on the launching thread; it must enqueue its GPU work on
//   ctx.native_stream (for example with LaunchScaleKernel from cuda/cuda_kernels.h).
using Kernel = std::function<void(const KernelContext&)>;

class Device {
 public:
  virtual ~Device() = default;

  // Position of this device on its server (0-based); the id ties are broken by.
  virtual int index() const = 0;
  virtual std::string name() const = 0;

  // --- Memory (real accounting: used_bytes() is the sum of live allocations) ---
  // Returns a device pointer to `bytes` bytes. ResourceExhausted when the capacity would be
  // exceeded; InvalidArgument when bytes == 0.
  virtual StatusOr<void*> Allocate(size_t bytes) = 0;
  // NotFound when `ptr` is not a live allocation of this device.
  // REQUIRES: no enqueued work still uses `ptr` (synchronize first).
  virtual Status Free(void* ptr) = 0;
  virtual size_t total_bytes() const = 0;
  virtual size_t used_bytes() const = 0;
  size_t free_bytes() const { return total_bytes() - used_bytes(); }
  MiB free_mib() const { return static_cast<MiB>(free_bytes() >> 20); }
  MiB total_mib() const { return static_cast<MiB>(total_bytes() >> 20); }

  // --- Streams ---
  virtual int stream_count() const = 0;
  virtual int free_streams() const = 0;
  // The lowest-numbered free stream; ResourceExhausted when every stream is acquired.
  virtual StatusOr<StreamId> AcquireStream() = 0;
  // InvalidArgument when `stream` is not an acquired stream of this device. Work already
  // enqueued on it still runs.
  virtual Status ReleaseStream(StreamId stream) = 0;

  // --- Work, asynchronous in stream order ---
  // The host buffer must stay valid until the copy has run (synchronize the stream).
  virtual Status CopyToDevice(StreamId stream, void* device_dst, const void* host_src,
                              size_t bytes) = 0;
  virtual Status CopyToHost(StreamId stream, void* host_dst, const void* device_src,
                            size_t bytes) = 0;
  virtual Status Launch(StreamId stream, Kernel kernel) = 0;
  // Blocks until everything enqueued on `stream` has run.
  virtual Status Synchronize(StreamId stream) = 0;
  // Blocks until everything enqueued on every stream has run.
  virtual Status SynchronizeAll() = 0;

  // --- Host memory for streaming ---
  // Page-locks the caller's host range [ptr, ptr + bytes) so copies to and from it run
  // asynchronously at full bandwidth (cudaHostRegister). Returns true when this call pinned it
  // (UnpinHost it later, before it is freed), false when the backend has nothing to pin
  // (SimDevice: host memory already). An error says why pinning failed; the range stays usable
  // as pageable memory, only slower.
  virtual StatusOr<bool> PinHost(void* /*ptr*/, size_t /*bytes*/) { return false; }
  // Undoes a PinHost that returned true. REQUIRES: no enqueued copy still uses the range.
  virtual Status UnpinHost(void* /*ptr*/) { return Status::Ok(); }
};

}  // namespace gpusched::dispatch
