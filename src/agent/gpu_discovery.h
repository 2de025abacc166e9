#pragma once
// GPU discovery: what GPUs this node has and how much memory is free on each. NVML (loaded
// with dlopen, so the agent runs on machines without a driver) when libnvidia-ml.so.1 is
// present; otherwise simulated GPUs described on the command line ("8x80GiB").
//
// Thread-safety: FreeMib may be called from any thread.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "core/gpu_health.h"
#include "core/topology.h"

namespace gpusched::agent {

struct GpuInfo {
  std::string model;
  MiB total_mib = 0;
};

// GPU memory one process holds on one GPU (NVML's per-process accounting).
struct GpuProcessMemory {
  int gpu = 0;
  int pid = 0;
  MiB used_mib = 0;
};

// One process's recent GPU utilisation on one GPU (NVML's per-process samples: SM %).
struct GpuProcessUtil {
  int gpu = 0;
  int pid = 0;
  int sm_util = 0;  // percent, the highest of the samples since the last call
};

class GpuDiscovery {
 public:
  virtual ~GpuDiscovery() = default;
  virtual const std::vector<GpuInfo>& gpus() const = 0;
  // Free memory per GPU as the device reports it; -1 where unknown (simulated GPUs).
  virtual std::vector<MiB> FreeMib() = 0;
  virtual bool simulated() const = 0;
  // One health check per GPU, in index order: true = passed. A simulated GPU always passes
  // (its faults come from --fault-file); an NVML one passes when the device still answers.
  virtual std::vector<bool> CheckHealth() { return std::vector<bool>(gpus().size(), true); }
  // Faults the driver reported since the last call (NVML events: Xid errors other than the
  // ones an application causes, uncorrectable ECC errors). Never blocks.
  virtual std::vector<core::GpuFault> PollFaults() { return {}; }
  // What each process holds on each GPU; empty where unknown (simulated GPUs, a driver
  // without per-process accounting). In (gpu, pid) order.
  virtual std::vector<GpuProcessMemory> ProcessMemory() { return {}; }
  // The processes that used the GPUs since the last call, with their utilisation; a process
  // absent from it used none. nullopt where unknown (simulated GPUs, a driver without
  // nvmlDeviceGetProcessUtilization). In (gpu, pid) order.
  virtual std::optional<std::vector<GpuProcessUtil>> ProcessUtilization() { return std::nullopt; }
  // The interconnect as the driver reports it; empty when unknown (simulated GPUs).
  virtual core::GpuTopology Topology() { return {}; }
};

// "8x80GiB", "2x16GiB", "4x24576" (MiB), "0" (no GPUs); model "SIM-<size>".
StatusOr<std::vector<GpuInfo>> ParseGpuList(const std::string& text);

std::unique_ptr<GpuDiscovery> MakeSimulatedGpus(std::vector<GpuInfo> gpus);
// NVML, or NotFound when no driver library is present (the caller falls back). `library`
// is what dlopen loads (tests name a fake).
StatusOr<std::unique_ptr<GpuDiscovery>> OpenNvml(const std::string& library = "libnvidia-ml.so.1");

}  // namespace gpusched::agent
