#pragma once
// The seam between libgpusched_c.so and its CUDA plugin, libgpusched_cuda.so.1 (issue 42): the
// C library links no CUDA library and dlopens the plugin at first use (c_api/cuda_loader.h);
// the plugin holds everything that needs the CUDA runtime (CudaDevice, the CUDA kernels of the
// built-ins) over the static cudart, which itself dlopens libcuda.so.1. So one libgpusched_c
// loads on CPU-only hosts, with simulated devices, and drives real GPUs where a driver is.
//
// The plugin exports one C-linkage function, kCudaPluginEntry, returning a CudaPlugin table.
// The table passes C++ types (Status, Device, Kernel), so the plugin must come from the same
// build as the library: `build` (kCudaPluginBuild, set by CMake) is compared before use, and
// `version`/`size` are checked first, so an older or newer plugin is refused by name, not called.

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "dispatch/device.h"

namespace gpusched::chunks {
struct Kernel;
}

namespace gpusched::dispatch {

inline constexpr uint32_t kCudaPluginVersion = 1;
inline constexpr char kCudaPluginFile[] = "libgpusched_cuda.so.1";
inline constexpr char kCudaPluginEntry[] = "gpusched_cuda_plugin_v1";
#ifdef GPUSCHED_CUDA_PLUGIN_BUILD
inline constexpr char kCudaPluginBuild[] = GPUSCHED_CUDA_PLUGIN_BUILD;
#else
inline constexpr char kCudaPluginBuild[] = "unstamped";
#endif

struct CudaPlugin {
  uint32_t version;   // kCudaPluginVersion
  uint32_t size;      // sizeof(CudaPlugin)
  const char* build;  // kCudaPluginBuild of the plugin's build
  // CUDA devices visible; Unavailable naming why there are none (no driver, no GPU).
  StatusOr<int> (*device_count)();
  // CudaDevice::Open(index, streams).
  StatusOr<std::unique_ptr<Device>> (*open)(int index, int streams);
  // chunks::AddCudaImplementation: sets a built-in kernel's native_run.
  void (*add_cuda_implementation)(chunks::Kernel& kernel);
};

using CudaPluginEntry = const CudaPlugin* (*)();

}  // namespace gpusched::dispatch
