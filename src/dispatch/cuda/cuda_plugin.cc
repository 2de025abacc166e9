// The CUDA plugin's one export (cuda_plugin.h): the table over CudaDevice and the CUDA built-ins.
// Built into libgpusched_cuda.so.1 only, whose version script exports nothing else.

#include "dispatch/cuda/cuda_plugin.h"

#include "dispatch/chunks/cuda_builtins.h"
#include "dispatch/cuda/cuda_device.h"

namespace gpusched::dispatch {
namespace {

StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int index, int streams) {
  GS_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Open(index, streams));
  return std::unique_ptr<Device>(std::move(device));
}

constexpr CudaPlugin kPlugin = {kCudaPluginVersion, sizeof(CudaPlugin), kCudaPluginBuild,
                                &CudaDevice::Probe, &OpenCudaDevice,
                                &chunks::AddCudaImplementation};

}  // namespace
}  // namespace gpusched::dispatch

extern "C" __attribute__((visibility("default"))) const gpusched::dispatch::CudaPlugin*
gpusched_cuda_plugin_v1() {
  return &gpusched::dispatch::kPlugin;
}
