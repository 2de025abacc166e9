#include "core/topology.h"

namespace gpusched::core {

const char* GpuLinkName(GpuLink link) {
  switch (link) {
    case GpuLink::kCrossSocket: return "cross-socket";
    case GpuLink::kSameNuma: return "same-NUMA PCIe";
    case GpuLink::kPcieSwitch: return "PCIe switch";
    case GpuLink::kNvLink: return "NVLink";
  }
  return "unknown";
}

StatusOr<GpuTopology> SimulatedTopology(std::string_view name, int gpus) {
  GpuTopology t;
  if (name.empty()) return t;
  const bool pairs = name == "nvlink-pairs", all = name == "nvswitch";
  if (!pairs && !all && name != "pcie") {
    return InvalidArgument("topology: \"" + std::string(name.substr(0, 64)) +
                           "\" is not pcie, nvlink-pairs or nvswitch");
  }
  t.gpus = gpus;
  t.links.assign(static_cast<size_t>(gpus * gpus), 0);
  t.numa.resize(static_cast<size_t>(gpus));
  const int half = (gpus + 1) / 2;
  for (int a = 0; a < gpus; ++a) t.numa[static_cast<size_t>(a)] = a < half ? 0 : 1;
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      GpuLink l = t.numa[static_cast<size_t>(a)] == t.numa[static_cast<size_t>(b)]
                      ? GpuLink::kSameNuma
                      : GpuLink::kCrossSocket;
      if (all || (pairs && a / 2 == b / 2)) l = GpuLink::kNvLink;
      t.links[static_cast<size_t>(a * gpus + b)] = static_cast<uint8_t>(l);
    }
  }
  return t;
}

Status ValidateTopology(const GpuTopology& t) {
  if (t.links.empty() && t.numa.empty()) return Status::Ok();
  if (t.gpus < 0 || t.links.size() != static_cast<size_t>(t.gpus) * static_cast<size_t>(t.gpus)) {
    return InvalidArgument("gpu_links: " + std::to_string(t.links.size()) + " values for " +
                           std::to_string(t.gpus) + " GPUs (want gpus x gpus)");
  }
  for (int a = 0; a < t.gpus; ++a) {
    for (int b = 0; b < t.gpus; ++b) {
      const uint8_t v = t.links[static_cast<size_t>(a * t.gpus + b)];
      if (v >= kGpuLinkLevels) {
        return InvalidArgument("gpu_links[" + std::to_string(a) + "][" + std::to_string(b) +
                               "]: " + std::to_string(v) + " is not a link level 0..3");
      }
      if (v != t.links[static_cast<size_t>(b * t.gpus + a)]) {
        return InvalidArgument("gpu_links[" + std::to_string(a) + "][" + std::to_string(b) +
                               "]: " + std::to_string(v) + " differs from gpu_links[" +
                               std::to_string(b) + "][" + std::to_string(a) + "]");
      }
    }
  }
  if (!t.numa.empty() && t.numa.size() != static_cast<size_t>(t.gpus)) {
    return InvalidArgument("numa: " + std::to_string(t.numa.size()) + " values for " +
                           std::to_string(t.gpus) + " GPUs");
  }
  for (size_t g = 0; g < t.numa.size(); ++g) {
    if (t.numa[g] < -1 || t.numa[g] > 1023) {
      return InvalidArgument("numa[" + std::to_string(g) + "]: " + std::to_string(t.numa[g]) +
                             " is not a NUMA node (-1 = unknown)");
    }
  }
  return Status::Ok();
}

}  // namespace gpusched::core
