// NVML through dlopen: no nvml.h and no link-time dependency, so one agent binary runs on GPU
// and non-GPU machines. Only the few entry points below are declared, with the signatures of
// NVML's public C API.

#include <dlfcn.h>

#include <algorithm>
#include <map>

#include "agent/gpu_discovery.h"

namespace gpusched::agent {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
constexpr NvmlReturn kInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
using NvmlDevice = void*;
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlProcessInfo {  // nvmlProcessInfo_t (v2 and v3 share this layout)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct NvmlProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long time_stamp;  // CPU timestamp, microseconds
  unsigned int sm_util;
  unsigned int mem_util;
  unsigned int enc_util;
  unsigned int dec_util;
};
constexpr NvmlReturn kNotFound = 6;  // NVML_ERROR_NOT_FOUND: no samples since the timestamp

struct NvmlEventData {  // nvmlEventData_t
  NvmlDevice device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid for an Xid event
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr unsigned long long kEventDoubleBitEcc = 0x2;  // nvmlEventTypeDoubleBitEccError
constexpr unsigned long long kEventXid = 0x8;           // nvmlEventTypeXidCriticalError
// Xids an application causes (illegal address, bad launch, ...), not the GPU: the same ones
// the NVIDIA device plugin for Kubernetes ignores.
bool ApplicationXid(unsigned long long xid) {
  for (unsigned long long x : {13ULL, 31ULL, 43ULL, 45ULL, 68ULL, 109ULL}) {
    if (xid == x) return true;
  }
  return false;
}

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*count)(unsigned int*);
  NvmlReturn (*handle)(unsigned int, NvmlDevice*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int);
  // Optional (older drivers lack it): per-process accounting for the watchdog.
  NvmlReturn (*processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*);
  // Optional: per-process utilisation samples for idle allocations.
  NvmlReturn (*process_util)(NvmlDevice, NvmlProcessUtilizationSample*, unsigned int*,
                             unsigned long long);
  // Optional: Xid and ECC events for health.
  NvmlReturn (*event_set_create)(void**);
  NvmlReturn (*register_events)(NvmlDevice, unsigned long long, void*);
  NvmlReturn (*event_set_wait)(void*, NvmlEventData*, unsigned int);
  NvmlReturn (*event_set_free)(void*);
  // Optional: topology.
  NvmlReturn (*common_ancestor)(NvmlDevice, NvmlDevice, int*);
  NvmlReturn (*p2p_status)(NvmlDevice, NvmlDevice, int, int*);
  NvmlReturn (*numa_node)(NvmlDevice, unsigned int*);
};
constexpr int kP2pCapsNvLink = 3;        // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kTopologyMultiple = 20;    // NVML_TOPOLOGY_MULTIPLE: under PCIe switches
constexpr int kTopologyNode = 40;        // NVML_TOPOLOGY_NODE: within one NUMA node

class NvmlGpus final : public GpuDiscovery {
 public:
  NvmlGpus(void* lib, NvmlApi api, std::vector<NvmlDevice> devices, std::vector<GpuInfo> gpus)
      : lib_(lib), api_(api), devices_(std::move(devices)), gpus_(std::move(gpus)) {
    if (api_.event_set_create == nullptr || api_.register_events == nullptr ||
        api_.event_set_wait == nullptr || api_.event_set_create(&events_) != 0) {
      events_ = nullptr;
      return;
    }
    for (NvmlDevice d : devices_) api_.register_events(d, kEventXid | kEventDoubleBitEcc, events_);
  }
  ~NvmlGpus() override {
    if (events_ != nullptr && api_.event_set_free != nullptr) api_.event_set_free(events_);
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
  // NVLink where NVML's P2P status says so, else the PCIe level of the common ancestor;
  // each GPU's NUMA node where the driver knows it. Empty when the driver lacks the calls.
  core::GpuTopology Topology() override {
    core::GpuTopology t;
    if (api_.common_ancestor == nullptr || devices_.empty()) return t;
    const int n = static_cast<int>(devices_.size());
    t.gpus = n;
    t.links.assign(static_cast<size_t>(n * n), 0);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        int status = -1, level = 50;
        core::GpuLink link = core::GpuLink::kCrossSocket;
        if (api_.p2p_status != nullptr &&
            api_.p2p_status(devices_[a], devices_[b], kP2pCapsNvLink, &status) == 0 && status == 0) {
          link = core::GpuLink::kNvLink;
        } else if (api_.common_ancestor(devices_[a], devices_[b], &level) == 0) {
          link = level <= kTopologyMultiple ? core::GpuLink::kPcieSwitch
                 : level <= kTopologyNode   ? core::GpuLink::kSameNuma
                                            : core::GpuLink::kCrossSocket;
        }
        t.links[static_cast<size_t>(a * n + b)] = t.links[static_cast<size_t>(b * n + a)] =
            static_cast<uint8_t>(link);
      }
    }
    for (NvmlDevice d : devices_) {
      unsigned int node = 0;
      t.numa.push_back(api_.numa_node != nullptr && api_.numa_node(d, &node) == 0
                           ? static_cast<int>(node)
                           : -1);
    }
    return t;
  }
  std::vector<core::GpuFault> PollFaults() override {
    std::vector<core::GpuFault> out;
    NvmlEventData e{};
    // Timeout 0: only what is pending. At most 64 a call, so a storm cannot stall the loop.
    for (int n = 0; events_ != nullptr && n < 64 && api_.event_set_wait(events_, &e, 0) == 0; ++n) {
      int gpu = -1;
      for (size_t g = 0; g < devices_.size(); ++g) {
        if (devices_[g] == e.device) gpu = static_cast<int>(g);
      }
      if (gpu < 0) continue;
      if ((e.event_type & kEventXid) != 0 && !ApplicationXid(e.event_data)) {
        out.push_back({gpu, "Xid " + std::to_string(e.event_data)});
      } else if ((e.event_type & kEventDoubleBitEcc) != 0) {
        out.push_back({gpu, "ECC uncorrectable errors: 1"});
      }
    }
    return out;
  }
  std::vector<GpuProcessMemory> ProcessMemory() override {
    std::vector<GpuProcessMemory> out;
    if (api_.processes == nullptr) return out;
    for (size_t g = 0; g < devices_.size(); ++g) {
      std::vector<NvmlProcessInfo> infos(16);
      unsigned int count = static_cast<unsigned int>(infos.size());
      NvmlReturn r = api_.processes(devices_[g], &count, infos.data());
      if (r == kInsufficientSize) {  // more processes than room: once more with enough
        infos.resize(count + 8);
        count = static_cast<unsigned int>(infos.size());
        r = api_.processes(devices_[g], &count, infos.data());
      }
      if (r != 0) continue;
      for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
        out.push_back({static_cast<int>(g), static_cast<int>(infos[i].pid),
                       static_cast<MiB>(infos[i].used_gpu_memory >> 20)});
      }
    }
    return out;
  }
  std::optional<std::vector<GpuProcessUtil>> ProcessUtilization() override {
    if (api_.process_util == nullptr) return std::nullopt;
    last_sample_us_.resize(devices_.size(), 0);
    std::vector<GpuProcessUtil> out;
    for (size_t g = 0; g < devices_.size(); ++g) {
      std::vector<NvmlProcessUtilizationSample> samples(64);
      unsigned int count = static_cast<unsigned int>(samples.size());
      NvmlReturn r = api_.process_util(devices_[g], samples.data(), &count, last_sample_us_[g]);
      if (r == kInsufficientSize) {
        samples.resize(count + 16);
        count = static_cast<unsigned int>(samples.size());
        r = api_.process_util(devices_[g], samples.data(), &count, last_sample_us_[g]);
      }
      if (r == kNotFound) continue;  // no process used this GPU since the last call
      if (r != 0) return std::nullopt;
      std::map<int, int> busiest;  // pid -> highest SM % of its samples
      for (unsigned int i = 0; i < count && i < samples.size(); ++i) {
        int& u = busiest[static_cast<int>(samples[i].pid)];
        u = std::max(u, static_cast<int>(samples[i].sm_util));
        last_sample_us_[g] = std::max(last_sample_us_[g], samples[i].time_stamp);
      }
      for (const auto& [pid, util] : busiest) out.push_back({static_cast<int>(g), pid, util});
    }
    return out;
  }
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
  void* events_ = nullptr;  // nvmlEventSet_t; null when the driver has no events
  std::vector<unsigned long long> last_sample_us_;  // per device: newest utilisation sample
};

template <typename Fn>
bool Load(void* lib, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  return fn != nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<GpuDiscovery>> OpenNvml(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return NotFound("nvml: " + library + " not found (no NVIDIA driver)");
  NvmlApi api{};
  if (!Load(lib, "nvmlInit_v2", api.init) || !Load(lib, "nvmlShutdown", api.shutdown) ||
      !Load(lib, "nvmlDeviceGetCount_v2", api.count) ||
      !Load(lib, "nvmlDeviceGetHandleByIndex_v2", api.handle) ||
      !Load(lib, "nvmlDeviceGetMemoryInfo", api.memory) ||
      !Load(lib, "nvmlDeviceGetName", api.name)) {
    dlclose(lib);
    return NotFound("nvml: libnvidia-ml.so.1 lacks a required symbol");
  }
  Load(lib, "nvmlDeviceGetTopologyCommonAncestor", api.common_ancestor);
  Load(lib, "nvmlDeviceGetP2PStatus", api.p2p_status);
  Load(lib, "nvmlDeviceGetNumaNodeId", api.numa_node);
  Load(lib, "nvmlEventSetCreate", api.event_set_create);
  Load(lib, "nvmlDeviceRegisterEvents", api.register_events);
  Load(lib, "nvmlEventSetWait_v2", api.event_set_wait);
  Load(lib, "nvmlEventSetFree", api.event_set_free);
  if (!Load(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api.processes)) {
    Load(lib, "nvmlDeviceGetComputeRunningProcesses_v2", api.processes);
  }
  Load(lib, "nvmlDeviceGetProcessUtilization", api.process_util);
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
