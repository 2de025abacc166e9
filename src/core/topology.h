#pragma once
// GPU topology of a node: how each pair of GPUs is connected and which NUMA node each GPU
// hangs off. Agents report it (NVML, or a simulated topology: `gpusched agent --topology
// pcie|nvlink-pairs|nvswitch`); placement reads it (placement.cc, the topology rules):
//  - a multi-GPU task gets the best-connected set that fits (highest weakest link, then the
//    most strongly linked pairs), not merely the emptiest GPUs;
//  - a single-GPU task avoids breaking up a free NVLink pair when another GPU fits;
//  - the agent pins a task to the CPUs of its GPUs' NUMA node.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::core {

// How two GPUs are connected, best last (NVML's topology levels, coarsened).
enum class GpuLink : uint8_t {
  kCrossSocket = 0,  // through the CPU interconnect (NVML SYSTEM)
  kSameNuma = 1,     // through one CPU's PCIe host bridge (NVML NODE / HOSTBRIDGE)
  kPcieSwitch = 2,   // under one PCIe switch (NVML SINGLE / MULTIPLE)
  kNvLink = 3,       // NVLink, directly or through an NVSwitch
};
inline constexpr int kGpuLinkLevels = 4;
const char* GpuLinkName(GpuLink link);  // "cross-socket", "same-NUMA PCIe", "PCIe switch", "NVLink"

struct GpuTopology {
  int gpus = 0;
  std::vector<uint8_t> links;  // gpus x gpus, row-major, GpuLink; the diagonal is unused
  std::vector<int> numa;       // per GPU; -1 = unknown

  GpuLink link(int a, int b) const {
    return static_cast<GpuLink>(links[static_cast<size_t>(a * gpus + b)]);
  }
  bool empty() const { return links.empty(); }
};

// A simulated topology for `gpus` GPUs, GPUs 0..gpus/2-1 on NUMA node 0 and the rest on 1:
//   "pcie"          every pair through PCIe (same NUMA node, else cross-socket)
//   "nvlink-pairs"  as pcie, plus NVLink between GPUs 2k and 2k+1 (e.g. 8 x A100 PCIe with
//                   NVLink bridges)
//   "nvswitch"      every pair over NVLink (DGX/HGX)
// "" = no topology (placement ignores it). Errors name --topology and the value.
StatusOr<GpuTopology> SimulatedTopology(std::string_view name, int gpus);

// Checks a reported topology: `links` of gpus x gpus values 0..3, symmetric; `numa` empty or
// one value >= -1 per GPU. Errors name the field and the value.
Status ValidateTopology(const GpuTopology& t);

}  // namespace gpusched::core
