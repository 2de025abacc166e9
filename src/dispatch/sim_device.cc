#include "dispatch/sim_device.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace gpusched::dispatch {

SimDevice::SimDevice(const SimDeviceOptions& options, Clock& clock)
    : options_(options),
      name_(options.name.empty() ? "sim" + std::to_string(options.index) : options.name),
      total_bytes_(static_cast<size_t>(options.memory_mib) << 20),
      clock_(clock),
      streams_(static_cast<size_t>(options.streams < 1 ? 1 : options.streams)) {}

SimDevice::~SimDevice() {
  {
    std::unique_lock lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& s : streams_) {
    if (s.worker.joinable()) s.worker.join();
  }
  for (auto& [ptr, bytes] : allocations_) ::operator delete(const_cast<void*>(ptr));
}

StatusOr<void*> SimDevice::Allocate(size_t bytes) {
  if (bytes == 0) return InvalidArgument("bytes: must be > 0, got 0");
  std::lock_guard lock(mu_);
  if (bytes > total_bytes_ - used_bytes_) {
    return ResourceExhausted(name_ + ": cannot allocate " + std::to_string(bytes) +
                             " bytes, " + std::to_string(total_bytes_ - used_bytes_) + " free");
  }
  void* ptr = ::operator new(bytes, std::nothrow);
  if (ptr == nullptr) return ResourceExhausted(name_ + ": host memory exhausted");
  allocations_.emplace(ptr, bytes);
  used_bytes_ += bytes;
  return ptr;
}

Status SimDevice::Free(void* ptr) {
  std::lock_guard lock(mu_);
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) return NotFound(name_ + ": not a live allocation");
  used_bytes_ -= it->second;
  allocations_.erase(it);
  ::operator delete(ptr);
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
  work_cv_.notify_all();
  return Status::Ok();
}

void SimDevice::WorkerLoop(StreamId stream) {
  std::unique_lock lock(mu_);
  Stream& s = streams_[stream];
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !s.queue.empty(); });
    if (s.queue.empty()) return;  // stop_ and drained
    std::function<void()> op = std::move(s.queue.front());
    s.queue.pop_front();
    lock.unlock();
    op();
    lock.lock();
    if (--s.pending == 0) idle_cv_.notify_all();
  }
}

Status SimDevice::Synchronize(StreamId stream) {
  std::unique_lock lock(mu_);
  if (stream < 0 || stream >= static_cast<int>(streams_.size())) {
    return InvalidArgument("stream: " + std::to_string(stream) + " does not exist on " + name_);
  }
  idle_cv_.wait(lock, [&] { return streams_[stream].pending == 0; });
  return Status::Ok();
}

Status SimDevice::SynchronizeAll() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] {
    for (const auto& s : streams_) {
      if (s.pending != 0) return false;
    }
    return true;
  });
  return Status::Ok();
}

void SimDevice::ComputeMs(double ms) {
  {
    std::lock_guard lock(compute_mu_);
    ++active_compute_;
  }
  // Progress by the clock's actual elapsed time divided by the number of co-running kernels,
  // re-read every step, so arrivals and departures change everybody's speed (processor sharing).
  double left_ms = ms;
  int64_t prev_ns = clock_.NowNs();
  while (left_ms > 0) {
    clock_.SleepMs(1);
    const int64_t now_ns = clock_.NowNs();
    int sharers;
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
