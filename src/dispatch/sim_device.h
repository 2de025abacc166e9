#pragma once
// SimDevice: a simulated GPU that really computes. Device memory is host memory this object
// allocates and accounts against `memory_mib`; copies are memcpy; kernels are C++ callables run
// by one worker thread per stream, so work on different streams really runs concurrently and
// work on one stream runs in order. Worker threads start lazily, on a stream's first work.
//
// Two things keep the simulation's own costs out of what it measures:
// - Freed blocks keep their host memory for the next allocation of the same size (like CUDA's
//   caching allocators), so a chunk pipeline does not fault in fresh pages for every chunk;
//   first-touch page faults cost more than the memcpy itself. used_bytes() still counts live
//   allocations only, and the host memory held (live + kept) never exceeds `memory_mib`.
// - Synchronize(stream) runs the stream's queued work on the calling thread when the worker is
//   not already running an op of that stream, so the common enqueue-then-wait pattern costs no
//   thread hand-off. Work still runs in stream order, one op at a time per stream.
//
// Modelled GPU time: a kernel that stands for GPU compute calls ComputeMs(ms). The device is
// processor-shared: with k kernels inside ComputeMs at once, each progresses at 1/k speed, so
// co-running work finishes later, as on a real GPU that runs kernels of several streams at once.
// ComputeMs advances only with the injected Clock (RealClock in benchmarks, FakeClock in tests),
// in 1 ms steps, and the last step with the constructor's `wait_ns` when given.
//
// Thread-safety: all methods are thread-safe. The destructor waits for enqueued work.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "dispatch/device.h"

namespace gpusched::dispatch {

struct SimDeviceOptions {
  int index = 0;
  std::string name;   // empty: "sim<index>"
  MiB memory_mib = 16 * 1024;
  int streams = 4;    // REQUIRES: >= 1
};

class SimDevice final : public Device {
 public:
  // How ComputeMs waits out the last fraction of a ms of a kernel: called with
  // 0 < ns < 1'000'000, it must return after about `ns` of the clock's time. Clock sleeps whole
  // ms, so without one a kernel ends on the next ms step after its work is done (up to 1 ms
  // late, plus the sleep's slack). Benchmarks on a RealClock pass a ns-precise real wait; tests
  // on a FakeClock pass none (their time moves in whole ms anyway).
  using WaitNs = std::function<void(int64_t ns)>;

  // `clock` must outlive the device.
  SimDevice(const SimDeviceOptions& options, Clock& clock, WaitNs wait_ns = {});
  ~SimDevice() override;
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  int index() const override { return options_.index; }
  std::string name() const override { return name_; }

  StatusOr<void*> Allocate(size_t bytes) override;
  Status Free(void* ptr) override;
  size_t total_bytes() const override { return total_bytes_; }
  size_t used_bytes() const override;

  int stream_count() const override { return options_.streams; }
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

  // Occupies this device for `ms` of exclusive compute time, shared equally with every other
  // kernel inside ComputeMs at the same time (processor sharing). Call it from a kernel.
  void ComputeMs(double ms);
  // Kernels inside ComputeMs right now.
  int active_compute() const;
  // Clock steps taken inside ComputeMs so far, by all kernels. Lets a test that drives a
  // FakeClock wait until every kernel has seen its last advance.
  uint64_t compute_steps() const;

 private:
  struct Stream {
    std::deque<std::function<void()>> queue;
    int pending = 0;     // enqueued and not yet finished
    bool running = false;  // an op of this stream is executing (on the worker or a syncer)
    bool acquired = false;
    std::thread worker;
    // Per stream, so a hand-off wakes only the threads that care about this stream.
    std::condition_variable work_cv;  // the worker has something to run, or stop_
    std::condition_variable idle_cv;  // pending reached 0, or running became false
  };

  Status Enqueue(StreamId stream, std::function<void()> op);
  void WorkerLoop(StreamId stream);
  // Pops and runs the front op of `s`. REQUIRES: lock holds mu_, !s.queue.empty(), !s.running.
  void RunFront(Stream& s, std::unique_lock<std::mutex>& lock);
  bool IsDeviceRange(const void* ptr, size_t bytes) const;  // REQUIRES: mu_ held
  // Host memory for a block of `bytes`: a kept block of that size, or a new one (first evicting
  // kept blocks so live + kept stays within the capacity). REQUIRES: mu_ held.
  void* TakeHostBlock(size_t bytes);

  const SimDeviceOptions options_;
  const std::string name_;
  const size_t total_bytes_;
  Clock& clock_;
  const WaitNs wait_ns_;

  mutable std::mutex mu_;
  std::vector<Stream> streams_;
  std::unordered_map<const void*, size_t> allocations_;
  size_t used_bytes_ = 0;
  std::multimap<size_t, void*> kept_blocks_;  // freed blocks by size, pages already faulted in
  size_t kept_bytes_ = 0;
  bool stop_ = false;

  mutable std::mutex compute_mu_;
  int active_compute_ = 0;
  uint64_t compute_steps_ = 0;
};

}  // namespace gpusched::dispatch
