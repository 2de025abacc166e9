#include "dispatch/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <string>

namespace gpusched::dispatch {
namespace {

Status CudaError(cudaError_t e, const std::string& what) {
  return Internal(what + ": " + cudaGetErrorString(e));
}

cudaStream_t Native(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

StatusOr<int> CudaDevice::Probe() {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return Unavailable(std::string("no usable CUDA driver or GPU: cudaGetDeviceCount: ") +
                       cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
  if (n == 0) return Unavailable("no CUDA GPU: cudaGetDeviceCount found 0 devices");
  return n;
}

int CudaDevice::DeviceCount() {
  StatusOr<int> n = Probe();
  return n.ok() ? *n : 0;
}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int index, int streams,
                                                       MiB memory_cap_mib) {
  if (index < 0 || index >= DeviceCount()) {
    return Unavailable("cuda: no device " + std::to_string(index));
  }
  if (streams < 1) return InvalidArgument("streams: must be >= 1");
  if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, index); e != cudaSuccess) {
    return CudaError(e, "cudaGetDeviceProperties");
  }
  size_t total = prop.totalGlobalMem;
  if (memory_cap_mib > 0) total = std::min(total, static_cast<size_t>(memory_cap_mib) << 20);
  std::vector<void*> handles;
  for (int i = 0; i < streams; ++i) {
    cudaStream_t s = nullptr;
    if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
      for (void* h : handles) cudaStreamDestroy(Native(h));
      return CudaError(e, "cudaStreamCreate");
    }
    handles.push_back(s);
  }
  return std::unique_ptr<CudaDevice>(
      new CudaDevice(index, std::string(prop.name), total, std::move(handles)));
}

CudaDevice::CudaDevice(int index, std::string name, size_t total_bytes,
                       std::vector<void*> streams)
    : index_(index),
      name_(std::move(name)),
      total_bytes_(total_bytes),
      streams_(std::move(streams)),
      acquired_(streams_.size(), false) {}

CudaDevice::~CudaDevice() {
  cudaSetDevice(index_);
  for (void* s : streams_) {
    cudaStreamSynchronize(Native(s));
    cudaStreamDestroy(Native(s));
  }
  for (auto& [ptr, bytes] : allocations_) cudaFree(ptr);
}

StatusOr<void*> CudaDevice::Allocate(size_t bytes) {
  if (bytes == 0) return InvalidArgument("bytes: must be > 0, got 0");
  std::lock_guard lock(mu_);
  if (bytes > total_bytes_ - used_bytes_) {
    return ResourceExhausted(name_ + ": cannot allocate " + std::to_string(bytes) + " bytes");
  }
  cudaSetDevice(index_);
  void* ptr = nullptr;
  if (cudaError_t e = cudaMalloc(&ptr, bytes); e != cudaSuccess) {
    return ResourceExhausted(std::string("cudaMalloc: ") + cudaGetErrorString(e));
  }
  allocations_.emplace(ptr, bytes);
  used_bytes_ += bytes;
  return ptr;
}

Status CudaDevice::Free(void* ptr) {
  std::lock_guard lock(mu_);
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) return NotFound(name_ + ": not a live allocation");
  cudaSetDevice(index_);
  if (cudaError_t e = cudaFree(ptr); e != cudaSuccess) return CudaError(e, "cudaFree");
  used_bytes_ -= it->second;
  allocations_.erase(it);
  return Status::Ok();
}

size_t CudaDevice::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_bytes_;
}

int CudaDevice::free_streams() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (bool a : acquired_) n += a ? 0 : 1;
  return n;
}

StatusOr<StreamId> CudaDevice::AcquireStream() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < acquired_.size(); ++i) {
    if (!acquired_[i]) {
      acquired_[i] = true;
      return static_cast<StreamId>(i);
    }
  }
  return ResourceExhausted(name_ + ": all streams are in use");
}

Status CudaDevice::ReleaseStream(StreamId stream) {
  std::lock_guard lock(mu_);
  if (stream < 0 || stream >= static_cast<int>(acquired_.size()) || !acquired_[stream]) {
    return InvalidArgument("stream: " + std::to_string(stream) + " is not acquired");
  }
  acquired_[stream] = false;
  return Status::Ok();
}

Status CudaDevice::CheckStream(StreamId stream) const {
  if (stream < 0 || stream >= static_cast<int>(streams_.size())) {
    return InvalidArgument("stream: " + std::to_string(stream) + " does not exist");
  }
  return Status::Ok();
}

Status CudaDevice::CopyToDevice(StreamId stream, void* device_dst, const void* host_src,
                                size_t bytes) {
  GS_RETURN_IF_ERROR(CheckStream(stream));
  cudaSetDevice(index_);
  cudaError_t e = cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice,
                                  Native(streams_[stream]));
  return e == cudaSuccess ? Status::Ok() : CudaError(e, "cudaMemcpyAsync");
}

Status CudaDevice::CopyToHost(StreamId stream, void* host_dst, const void* device_src,
                              size_t bytes) {
  GS_RETURN_IF_ERROR(CheckStream(stream));
  cudaSetDevice(index_);
  cudaError_t e = cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost,
                                  Native(streams_[stream]));
  return e == cudaSuccess ? Status::Ok() : CudaError(e, "cudaMemcpyAsync");
}

Status CudaDevice::Launch(StreamId stream, Kernel kernel) {
  GS_RETURN_IF_ERROR(CheckStream(stream));
  if (!kernel) return InvalidArgument("kernel: empty");
  cudaSetDevice(index_);
  kernel(KernelContext{index_, stream, streams_[stream]});  // enqueues on the native stream
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::Ok() : CudaError(e, "kernel launch");
}

Status CudaDevice::Synchronize(StreamId stream) {
  GS_RETURN_IF_ERROR(CheckStream(stream));
  cudaError_t e = cudaStreamSynchronize(Native(streams_[stream]));
  return e == cudaSuccess ? Status::Ok() : CudaError(e, "cudaStreamSynchronize");
}

Status CudaDevice::SynchronizeAll() {
  for (StreamId s = 0; s < static_cast<StreamId>(streams_.size()); ++s) {
    GS_RETURN_IF_ERROR(Synchronize(s));
  }
  return Status::Ok();
}

StatusOr<bool> CudaDevice::PinHost(void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return InvalidArgument("PinHost: empty range");
  cudaSetDevice(index_);
  const cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();  // not sticky, but keep the next launch check clean
  if (e == cudaErrorHostMemoryAlreadyRegistered) {
    return FailedPrecondition("cudaHostRegister: the range is already (partly) registered");
  }
  return CudaError(e, "cudaHostRegister");
}

Status CudaDevice::UnpinHost(void* ptr) {
  cudaSetDevice(index_);
  const cudaError_t e = cudaHostUnregister(ptr);
  if (e == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return CudaError(e, "cudaHostUnregister");
}

}  // namespace gpusched::dispatch
