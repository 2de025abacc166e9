#pragma once
// The few parts of Kubernetes Node and Pod objects the extender reads, parsed from their
// ordinary JSON (lowerCamel keys, omitempty, apiVersion/kind optional; PROTOCOL.md 3.6).
//
// Resource names and annotations (a contract with users and with gpushare's device plugin):
//   nvidia.com/gpu            pod: whole GPUs, held exclusively; node: GPU count
//   gpusched.io/gpu-mem       pod: MiB on one shared GPU; node: MiB over all its GPUs
//   aliyun.com/gpu-mem        gpushare: the same in gpushare units (GiB unless configured)
//   aliyun.com/gpu-count      gpushare: node GPU count
//   node labels               gpusched.io/gpu-model, else nvidia.com/gpu.product (GFD): the
//                             GPU model; nvidia.com/gpu.memory (GFD, MiB) and
//                             nvidia.com/gpu.count when no memory resource is advertised
//   pod annotation            gpusched.io/gpu-model: the GPU model the pod requires
//   pod annotations at bind   gpusched.io/gpu-indices ("0,3"), gpusched.io/gpu-mem-mib (per
//                             GPU, shared pods) and gpushare's ALIYUN_COM_GPU_MEM_{IDX,POD,DEV,
//                             ASSIGNED,ASSUME_TIME} for shared pods on one GPU
//
// A node or pod whose GPU fields cannot be read keeps a readable `invalid` message instead of
// failing the whole request: the node is then rejected with that reason.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "core/node.h"
#include "extender/json_reader.h"

namespace gpusched::extender {

namespace names {
inline constexpr std::string_view kNvidiaGpu = "nvidia.com/gpu";
inline constexpr std::string_view kGpuMem = "gpusched.io/gpu-mem";
inline constexpr std::string_view kGpushareMem = "aliyun.com/gpu-mem";
inline constexpr std::string_view kGpushareCount = "aliyun.com/gpu-count";
inline constexpr std::string_view kLabelGpuModel = "gpusched.io/gpu-model";
inline constexpr std::string_view kLabelGfdProduct = "nvidia.com/gpu.product";
inline constexpr std::string_view kLabelGfdMemory = "nvidia.com/gpu.memory";
inline constexpr std::string_view kLabelGfdCount = "nvidia.com/gpu.count";
inline constexpr std::string_view kAnnGpuModel = "gpusched.io/gpu-model";
inline constexpr std::string_view kAnnGpuIndices = "gpusched.io/gpu-indices";
inline constexpr std::string_view kAnnGpuMemMib = "gpusched.io/gpu-mem-mib";
inline constexpr std::string_view kAnnGpushareIdx = "ALIYUN_COM_GPU_MEM_IDX";
inline constexpr std::string_view kAnnGpusharePod = "ALIYUN_COM_GPU_MEM_POD";
inline constexpr std::string_view kAnnGpushareDev = "ALIYUN_COM_GPU_MEM_DEV";
inline constexpr std::string_view kAnnGpushareAssigned = "ALIYUN_COM_GPU_MEM_ASSIGNED";
inline constexpr std::string_view kAnnGpushareAssumeTime = "ALIYUN_COM_GPU_MEM_ASSUME_TIME";
}  // namespace names

// A node's GPUs as the extender models them: `gpu_count` identical GPUs (see
// EffectiveMibPerGpu for their memory).
struct KubeNode {
  std::string name;
  std::string uid;
  std::string resource_version;
  std::map<std::string, std::string> labels;  // empty when parsed without labels
  std::vector<core::Taint> taints;
  bool ready = true;  // the Ready condition (true when the node reports no conditions)
  int64_t gpu_count = 0;
  // GPU memory per GPU from each source, 0 where the node does not advertise it:
  MiB resource_mib_per_gpu = 0;        // gpusched.io/gpu-mem / count
  int64_t gpushare_units_per_gpu = 0;  // aliyun.com/gpu-mem / count (integer division)
  MiB label_mib_per_gpu = 0;           // label nvidia.com/gpu.memory
  std::string gpu_model;
  std::string invalid;  // non-empty: why the GPU fields could not be read
};

// What a pod asks for, summed over its containers (init containers: the larger of their
// maximum and the containers' sum, as Kubernetes computes effective requests).
struct GpuAsk {
  int64_t whole_gpus = 0;       // nvidia.com/gpu
  MiB shared_mib = 0;           // gpusched.io/gpu-mem: MiB on one shared GPU
  int64_t gpushare_units = 0;   // aliyun.com/gpu-mem, in the node's gpushare unit
  std::string model;            // annotation gpusched.io/gpu-model; empty = any
  bool any() const { return whole_gpus > 0 || shared_mib > 0 || gpushare_units > 0; }
};

struct KubePod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string node_name;  // spec.nodeName; empty while pending
  std::string phase;      // status.phase
  int32_t priority = 0;
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::map<std::string, std::string> node_selector;
  std::vector<core::Toleration> tolerations;
  GpuAsk ask;
  // The GPU indices of the bind annotations (gpusched.io/gpu-indices, else gpushare's
  // ALIYUN_COM_GPU_MEM_IDX); empty when absent or unreadable. The amounts held come from
  // the pod's resources, which cannot change after creation.
  std::vector<int> annotated_gpus;
  std::string invalid;  // non-empty: why the GPU requests could not be read

  std::string Key() const { return ns + "/" + name; }
  // Holds resources on its node: bound and not finished.
  bool Active() const {
    return !node_name.empty() && phase != "Succeeded" && phase != "Failed";
  }
};

struct ParseNodeOptions {
  // Labels are only needed for node selectors; a request whose pod has none skips copying
  // them (the hot NodeList path). The GPU labels are read either way.
  bool keep_labels = true;
};

// Memory of one GPU of `node` in MiB: gpusched.io/gpu-mem, else the gpushare resource in
// units of `gpushare_unit_mib` (what gpushare pods are accounted in), else the GFD label;
// 0 when the node advertises none.
MiB EffectiveMibPerGpu(const KubeNode& node, MiB gpushare_unit_mib);
// The pod's need in MiB on one shared GPU (gpushare units converted); 0 for none.
MiB SharedMib(const GpuAsk& ask, MiB gpushare_unit_mib);

// Errors only for what makes the object unusable as a whole (not an object, no name).
StatusOr<KubeNode> ParseNode(JsonValue node, const ParseNodeOptions& options = {});
StatusOr<KubePod> ParsePod(JsonValue pod);

// "1,3" -> {1, 3}; nullopt unless every entry is an index in [0, 4096).
std::optional<std::vector<int>> ParseGpuIndices(std::string_view text);
std::string FormatGpuIndices(const std::vector<int>& gpus);

}  // namespace gpusched::extender
