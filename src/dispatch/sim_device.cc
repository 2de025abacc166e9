#include "dispatch/sim_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gpusched::dispatch {
namespace {

// Blocks of at least this size are 2 MiB aligned and advised as huge-page candidates: one
// fault then maps 2 MiB instead of 4 KiB, which is most of the cost of touching fresh memory.
constexpr size_t kHugePage = size_t{2} << 20;

void* AllocateHostBlock(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes, std::nothrow);
  void* ptr = ::operator new(bytes, std::align_val_t{kHugePage}, std::nothrow);
#if defined(MADV_HUGEPAGE)
  if (ptr != nullptr) (void)madvise(ptr, bytes, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
  return ptr;
}

// REQUIRES: `ptr` came from AllocateHostBlock(bytes).
void FreeHostBlock(void* ptr, size_t bytes) {
  if (bytes < kHugePage) {
    ::operator delete(ptr);
  } else {
    ::operator delete(ptr, std::align_val_t{kHugePage});
  }
}

}  // namespace

SimDevice::SimDevice(const SimDeviceOptions& options, Clock& clock, WaitNs wait_ns)
    : options_(options),
      name_(options.name.empty() ? "sim" + std::to_string(options.index) : options.name),
      total_bytes_(static_cast<size_t>(options.memory_mib) << 20),
      clock_(clock),
      wait_ns_(std::move(wait_ns)),
      streams_(static_cast<size_t>(options.streams < 1 ? 1 : options.streams)) {}

SimDevice::~SimDevice() {
  {
    std::unique_lock lock(mu_);
    stop_ = true;
  }
  for (auto& s : streams_) s.work_cv.notify_all();
  for (auto& s : streams_) {
    if (s.worker.joinable()) s.worker.join();
  }
  for (auto& [ptr, bytes] : allocations_) FreeHostBlock(const_cast<void*>(ptr), bytes);
  for (auto& [bytes, ptr] : kept_blocks_) FreeHostBlock(ptr, bytes);
}

StatusOr<void*> SimDevice::Allocate(size_t bytes) {
  if (bytes == 0) return InvalidArgument("bytes: must be > 0, got 0");
  std::lock_guard lock(mu_);
  if (bytes > total_bytes_ - used_bytes_) {
    return ResourceExhausted(name_ + ": cannot allocate " + std::to_string(bytes) +
                             " bytes, " + std::to_string(total_bytes_ - used_bytes_) + " free");
  }
  void* ptr = TakeHostBlock(bytes);
  if (ptr == nullptr) return ResourceExhausted(name_ + ": host memory exhausted");
  allocations_.emplace(ptr, bytes);
  used_bytes_ += bytes;
  return ptr;
}

void* SimDevice::TakeHostBlock(size_t bytes) {
  if (auto it = kept_blocks_.find(bytes); it != kept_blocks_.end()) {
    void* ptr = it->second;
    kept_blocks_.erase(it);
    kept_bytes_ -= bytes;
    return ptr;
  }
  // Evict the largest kept blocks first: they free the most room per eviction.
  while (kept_bytes_ > 0 && used_bytes_ + kept_bytes_ + bytes > total_bytes_) {
    auto last = std::prev(kept_blocks_.end());
    kept_bytes_ -= last->first;
    FreeHostBlock(last->second, last->first);
    kept_blocks_.erase(last);
  }
  return AllocateHostBlock(bytes);
}

Status SimDevice::Free(void* ptr) {
  std::lock_guard lock(mu_);
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) return NotFound(name_ + ": not a live allocation");
  used_bytes_ -= it->second;
  kept_blocks_.emplace(it->second, ptr);  // kept for the next allocation of this size
  kept_bytes_ += it->second;
  allocations_.erase(it);
  return Status::Ok();
}

size_t SimDevice::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_bytes_;
}

int SimDevice::free_streams() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& s : streams_) n += s.acquired ? 0 : 1;
  return n;
}

StatusOr<StreamId> SimDevice::AcquireStream() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!streams_[i].acquired) {
      streams_[i].acquired = true;
      return static_cast<StreamId>(i);
    }
  }
  return ResourceExhausted(name_ + ": all " + std::to_string(streams_.size()) +
                           " streams are in use");
}

Status SimDevice::ReleaseStream(StreamId stream) {
  std::lock_guard lock(mu_);
  if (stream < 0 || stream >= static_cast<int>(streams_.size()) ||
      !streams_[stream].acquired) {
    return InvalidArgument("stream: " + std::to_string(stream) + " is not acquired on " + name_);
  }
  streams_[stream].acquired = false;
  return Status::Ok();
}

bool SimDevice::IsDeviceRange(const void* ptr, size_t bytes) const {
  // Allocations are few; a linear scan keeps the map simple and catches interior pointers.
  const auto* p = static_cast<const std::byte*>(ptr);
  for (const auto& [base, size] : allocations_) {
    const auto* b = static_cast<const std::byte*>(base);
    if (p >= b && p + bytes <= b + size) return true;
  }
  return false;
}

Status SimDevice::CopyToDevice(StreamId stream, void* device_dst, const void* host_src,
                               size_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (!IsDeviceRange(device_dst, bytes)) {
      return InvalidArgument("device_dst: not inside a live allocation of " + name_);
    }
  }
  return Enqueue(stream, [=] { std::memcpy(device_dst, host_src, bytes); });
}

Status SimDevice::CopyToHost(StreamId stream, void* host_dst, const void* device_src,
                             size_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (!IsDeviceRange(device_src, bytes)) {
      return InvalidArgument("device_src: not inside a live allocation of " + name_);
    }
  }
  return Enqueue(stream, [=] { std::memcpy(host_dst, device_src, bytes); });
}

Status SimDevice::Launch(StreamId stream, Kernel kernel) {
  if (!kernel) return InvalidArgument("kernel: empty");
  KernelContext ctx{options_.index, stream, nullptr};
  return Enqueue(stream, [ctx, k = std::move(kernel)] { k(ctx); });
}

Status SimDevice::Enqueue(StreamId stream, std::function<void()> op) {
  std::lock_guard lock(mu_);
  if (stream < 0 || stream >= static_cast<int>(streams_.size())) {
    return InvalidArgument("stream: " + std::to_string(stream) + " does not exist on " + name_);
  }
  Stream& s = streams_[stream];
  s.queue.push_back(std::move(op));
  ++s.pending;
  if (!s.worker.joinable()) s.worker = std::thread([this, stream] { WorkerLoop(stream); });
  s.work_cv.notify_one();
  return Status::Ok();
}

void SimDevice::RunFront(Stream& s, std::unique_lock<std::mutex>& lock) {
  std::function<void()> op = std::move(s.queue.front());
  s.queue.pop_front();
  s.running = true;
  lock.unlock();
  op();
  lock.lock();
  s.running = false;
  --s.pending;
  // A synchronizer may be waiting for pending == 0, or for the chance to run the next op.
  s.idle_cv.notify_all();
}

void SimDevice::WorkerLoop(StreamId stream) {
  std::unique_lock lock(mu_);
  Stream& s = streams_[stream];
  for (;;) {
    // While a synchronizer runs this stream's ops it keeps going until the queue is empty, so
    // the worker only needs waking by Enqueue and by stop_.
    s.work_cv.wait(lock, [&] {
      return (stop_ && s.queue.empty()) || (!s.queue.empty() && !s.running);
    });
    if (s.queue.empty()) return;  // stopped and drained
    RunFront(s, lock);
  }
}

Status SimDevice::Synchronize(StreamId stream) {
  std::unique_lock lock(mu_);
  if (stream < 0 || stream >= static_cast<int>(streams_.size())) {
    return InvalidArgument("stream: " + std::to_string(stream) + " does not exist on " + name_);
  }
  Stream& s = streams_[stream];
  while (s.pending > 0) {
    if (!s.queue.empty() && !s.running) {
      RunFront(s, lock);  // help: the worker is idle or not yet awake; order is kept
    } else {
      s.idle_cv.wait(lock);
    }
  }
  return Status::Ok();
}

Status SimDevice::SynchronizeAll() {
  for (int i = 0; i < static_cast<int>(streams_.size()); ++i) GS_RETURN_IF_ERROR(Synchronize(i));
  return Status::Ok();
}

void SimDevice::ComputeMs(double ms) {
  int sharers;
  {
    std::lock_guard lock(compute_mu_);
    sharers = ++active_compute_;
  }
  // Progress by the clock's actual elapsed time divided by the number of co-running kernels,
  // re-read every step, so arrivals and departures change everybody's speed (processor sharing).
  double left_ms = ms;
  int64_t prev_ns = clock_.NowNs();
  while (left_ms > 0) {
    // At the current sharing, the work left takes left_ms * sharers of clock time. A step
    // shorter than 1 ms is the kernel's last (unless someone joins meanwhile): wait it out
    // exactly when the device can, so the kernel does not finish up to 1 ms late.
    const double step_ms = left_ms * sharers;
    if (step_ms < 1.0 && wait_ns_) {
      wait_ns_(std::max<int64_t>(1, static_cast<int64_t>(step_ms * 1e6)));
    } else {
      clock_.SleepMs(1);
    }
    const int64_t now_ns = clock_.NowNs();
    {
      std::lock_guard lock(compute_mu_);
      sharers = active_compute_;
      ++compute_steps_;
    }
    left_ms -= static_cast<double>(now_ns - prev_ns) / 1e6 / sharers;
    prev_ns = now_ns;
  }
  std::lock_guard lock(compute_mu_);
  --active_compute_;
}

int SimDevice::active_compute() const {
  std::lock_guard lock(compute_mu_);
  return active_compute_;
}

uint64_t SimDevice::compute_steps() const {
  std::lock_guard lock(compute_mu_);
  return compute_steps_;
}

}  // namespace gpusched::dispatch
