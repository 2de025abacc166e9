// NVML through dlopen: no nvml.h and no link-time dependency, so one agent binary runs on GPU
// and non-GPU machines. Only the few entry points below are declared, with the signatures of
// NVML's public C API.

#include <dlfcn.h>

#include "agent/gpu_discovery.h"

namespace gpusched::agent {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*count)(unsigned int*);
  NvmlReturn (*handle)(unsigned int, NvmlDevice*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int);
};

class NvmlGpus final : public GpuDiscovery {
 public:
  NvmlGpus(void* lib, NvmlApi api, std::vector<NvmlDevice> devices, std::vector<GpuInfo> gpus)
      : lib_(lib), api_(api), devices_(std::move(devices)), gpus_(std::move(gpus)) {}
  ~NvmlGpus() override {
    api_.shutdown();
    dlclose(lib_);
  }
  const std::vector<GpuInfo>& gpus() const override { return gpus_; }
  std::vector<MiB> FreeMib() override {
    std::vector<MiB> out;
    for (NvmlDevice d : devices_) {
      NvmlMemory m{};
      out.push_back(api_.memory(d, &m) == 0 ? static_cast<MiB>(m.free >> 20) : -1);
    }
    return out;
  }
  bool simulated() const override { return false; }
  std::vector<bool> CheckHealth() override {
    std::vector<bool> out;
    for (NvmlDevice d : devices_) {
      NvmlMemory m{};
      out.push_back(api_.memory(d, &m) == 0);
    }
    return out;
  }

 private:
  void* lib_;
  NvmlApi api_;
  std::vector<NvmlDevice> devices_;
  std::vector<GpuInfo> gpus_;
};

template <typename Fn>
bool Load(void* lib, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  return fn != nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<GpuDiscovery>> OpenNvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return NotFound("nvml: libnvidia-ml.so.1 not found (no NVIDIA driver)");
  NvmlApi api{};
  if (!Load(lib, "nvmlInit_v2", api.init) || !Load(lib, "nvmlShutdown", api.shutdown) ||
      !Load(lib, "nvmlDeviceGetCount_v2", api.count) ||
      !Load(lib, "nvmlDeviceGetHandleByIndex_v2", api.handle) ||
      !Load(lib, "nvmlDeviceGetMemoryInfo", api.memory) ||
      !Load(lib, "nvmlDeviceGetName", api.name)) {
    dlclose(lib);
    return NotFound("nvml: libnvidia-ml.so.1 lacks a required symbol");
  }
  if (api.init() != 0) {
    dlclose(lib);
    return Unavailable("nvml: nvmlInit failed (driver not loaded?)");
  }
  unsigned int count = 0;
  std::vector<NvmlDevice> devices;
  std::vector<GpuInfo> gpus;
  if (api.count(&count) == 0) {
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice d = nullptr;
      NvmlMemory m{};
      char name[96] = {};
      if (api.handle(i, &d) != 0 || api.memory(d, &m) != 0) continue;
      if (api.name(d, name, sizeof name) != 0) name[0] = '\0';
      devices.push_back(d);
      gpus.push_back({name[0] != '\0' ? name : "GPU", static_cast<MiB>(m.total >> 20)});
    }
  }
  return std::unique_ptr<GpuDiscovery>(
      new NvmlGpus(lib, api, std::move(devices), std::move(gpus)));
}

}  // namespace gpusched::agent
