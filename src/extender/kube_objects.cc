#include "extender/kube_objects.h"

#include <algorithm>
#include <charconv>

#include "core/task_validation.h"
#include "extender/quantity.h"

namespace gpusched::extender {
namespace {

// A whole quantity from allocatable (what the scheduler uses), else capacity; 0 if absent.
StatusOr<int64_t> NodeQuantity(JsonValue status, std::string_view resource) {
  for (std::string_view section : {"allocatable", "capacity"}) {
    const JsonValue v = status.Get(section).Get(resource);
    if (v.is_null()) continue;
    const std::string field =
        "status." + std::string(section) + "[\"" + std::string(resource) + "\"]";
    auto text = v.String();
    if (!text) return InvalidArgument(field + ": expected a quantity string, got " + std::string(v.raw()));
    return ParseWholeQuantity(*text, field);
  }
  return int64_t{0};
}

std::optional<int64_t> ParseSmallInt(std::string_view text) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

core::TaintEffect ParseEffect(std::string_view effect) {
  if (effect == "PreferNoSchedule") return core::TaintEffect::kPreferNoSchedule;
  if (effect == "NoExecute") return core::TaintEffect::kNoExecute;
  return core::TaintEffect::kNoSchedule;  // also for values Kubernetes would not accept
}

void ReadStringMap(JsonValue object, std::map<std::string, std::string>& out) {
  object.ForEachMember([&](std::string_view key, JsonValue v) {
    if (auto s = v.String()) out.emplace(std::string(key), std::move(*s));
    return true;
  });
}

Status ReadNodeGpus(JsonValue status, int64_t label_count, KubeNode& n) {
  GS_ASSIGN_OR_RETURN(const int64_t nvidia, NodeQuantity(status, names::kNvidiaGpu));
  GS_ASSIGN_OR_RETURN(const int64_t share_count, NodeQuantity(status, names::kGpushareCount));
  GS_ASSIGN_OR_RETURN(const int64_t mem_mib, NodeQuantity(status, names::kGpuMem));
  GS_ASSIGN_OR_RETURN(const int64_t share_mem, NodeQuantity(status, names::kGpushareMem));
  const int64_t count = nvidia > 0 ? nvidia : share_count > 0 ? share_count : label_count;
  // Checked before it is kept: an invalid node is still modelled (with no GPUs), and a count
  // such as "8Gi" (8 x 2^30) must never size its GPU list.
  if (count > 4096) {
    return InvalidArgument("GPU count " + std::to_string(count) + " is not plausible");
  }
  n.gpu_count = count;
  if (n.gpu_count > 0) {
    n.resource_mib_per_gpu = mem_mib / n.gpu_count;
    n.gpushare_units_per_gpu = share_mem / n.gpu_count;
  }
  return Status::Ok();
}

// The GPU labels, read even when the other labels are not kept. Returns the GFD count label.
int64_t ReadGpuLabels(JsonValue labels, KubeNode& n) {
  int64_t label_count = 0;
  std::string model_override;
  labels.ForEachMember([&](std::string_view key, JsonValue v) {
    if (key == names::kLabelGpuModel) {
      model_override = v.StringOr();
    } else if (key == names::kLabelGfdProduct) {
      n.gpu_model = v.StringOr();
    } else if (key == names::kLabelGfdMemory) {
      n.label_mib_per_gpu = ParseSmallInt(v.StringOr()).value_or(0);
    } else if (key == names::kLabelGfdCount) {
      label_count = ParseSmallInt(v.StringOr()).value_or(0);
    }
    return true;
  });
  if (!model_override.empty()) n.gpu_model = model_override;
  return label_count;
}

// Effective request of one extended resource: the containers' sum, or the largest init
// container when that is larger. Requests win over limits (they are equal when both are set).
StatusOr<int64_t> PodQuantity(JsonValue spec, std::string_view resource) {
  int64_t sum = 0, init_max = 0;
  for (std::string_view list : {"containers", "initContainers"}) {
    Status error;
    size_t i = 0;
    spec.Get(list).ForEachItem([&](JsonValue c) {
      const JsonValue resources = c.Get("resources");
      JsonValue v = resources.Get("requests").Get(resource);
      std::string_view section = "requests";
      if (v.is_null()) {
        v = resources.Get("limits").Get(resource);
        section = "limits";
      }
      if (!v.is_null()) {
        const std::string field = "spec." + std::string(list) + "[" + std::to_string(i) +
                                  "].resources." + std::string(section) + "[\"" +
                                  std::string(resource) + "\"]";
        auto parsed = ParseWholeQuantity(v.StringOr(v.raw()), field);
        if (!parsed.ok()) {
          error = parsed.status();
          return false;
        }
        if (list == "containers") {
          sum += *parsed;
        } else {
          init_max = std::max(init_max, *parsed);
        }
      }
      ++i;
      return true;
    });
    if (!error.ok()) return error;
  }
  return std::max(sum, init_max);
}

Status ReadPodAsk(JsonValue spec, KubePod& p) {
  GS_ASSIGN_OR_RETURN(p.ask.whole_gpus, PodQuantity(spec, names::kNvidiaGpu));
  GS_ASSIGN_OR_RETURN(p.ask.shared_mib, PodQuantity(spec, names::kGpuMem));
  GS_ASSIGN_OR_RETURN(p.ask.gpushare_units, PodQuantity(spec, names::kGpushareMem));
  if (p.ask.shared_mib > core::kMaxGpuMemMib) {
    return InvalidArgument("gpusched.io/gpu-mem: " + std::to_string(p.ask.shared_mib) +
                           " MiB is more than any GPU has (the resource counts MiB: write "
                           "4096 for 4 GiB, not 4Gi)");
  }
  if (p.ask.whole_gpus > 0 && (p.ask.shared_mib > 0 || p.ask.gpushare_units > 0)) {
    return InvalidArgument(
        "the pod asks for whole GPUs (nvidia.com/gpu) and for a GPU-memory share "
        "(gpusched.io/gpu-mem or aliyun.com/gpu-mem); ask for one or the other");
  }
  if (p.ask.shared_mib > 0 && p.ask.gpushare_units > 0) {
    return InvalidArgument(
        "the pod asks for GPU memory twice (gpusched.io/gpu-mem and aliyun.com/gpu-mem); "
        "use one");
  }
  return Status::Ok();
}

void ReadTolerations(JsonValue list, std::vector<core::Toleration>& out) {
  list.ForEachItem([&](JsonValue t) {
    core::Toleration tol;
    tol.key = t.Get("key").StringOr();
    tol.value = t.Get("value").StringOr();
    tol.exists = t.Get("operator").StringEquals("Exists");
    const std::string effect = t.Get("effect").StringOr();
    tol.has_effect = !effect.empty();
    if (tol.has_effect) tol.effect = ParseEffect(effect);
    out.push_back(std::move(tol));
    return true;
  });
}

}  // namespace

MiB EffectiveMibPerGpu(const KubeNode& node, MiB gpushare_unit_mib) {
  if (node.resource_mib_per_gpu > 0) return node.resource_mib_per_gpu;
  if (node.gpushare_units_per_gpu > 0) return node.gpushare_units_per_gpu * gpushare_unit_mib;
  return node.label_mib_per_gpu;
}

MiB SharedMib(const GpuAsk& ask, MiB gpushare_unit_mib) {
  return ask.shared_mib > 0 ? ask.shared_mib : ask.gpushare_units * gpushare_unit_mib;
}

StatusOr<KubeNode> ParseNode(JsonValue node, const ParseNodeOptions& options) {
  if (!node.is_object()) {
    return InvalidArgument("node: expected an object, got " + std::string(node.raw().substr(0, 40)));
  }
  KubeNode n;
  const JsonValue meta = node.Get("metadata");
  n.name = meta.Get("name").StringOr();
  if (n.name.empty()) return InvalidArgument("node: metadata.name is missing");
  n.uid = meta.Get("uid").StringOr();
  n.resource_version = meta.Get("resourceVersion").StringOr();
  const JsonValue labels = meta.Get("labels");
  if (options.keep_labels) ReadStringMap(labels, n.labels);
  const int64_t label_count = ReadGpuLabels(labels, n);
  node.Get("spec").Get("taints").ForEachItem([&](JsonValue t) {
    core::Taint taint;
    taint.key = t.Get("key").StringOr();
    taint.value = t.Get("value").StringOr();
    taint.effect = ParseEffect(t.Get("effect").StringOr());
    n.taints.push_back(std::move(taint));
    return true;
  });
  const JsonValue status = node.Get("status");
  status.Get("conditions").ForEachItem([&](JsonValue c) {
    if (!c.Get("type").StringEquals("Ready")) return true;
    n.ready = c.Get("status").StringEquals("True");
    return false;
  });
  if (Status s = ReadNodeGpus(status, label_count, n); !s.ok()) {
    n.invalid = "node " + n.name + ": " + s.message();
  }
  return n;
}

StatusOr<KubePod> ParsePod(JsonValue pod) {
  if (!pod.is_object()) {
    return InvalidArgument("pod: expected an object, got " + std::string(pod.raw().substr(0, 40)));
  }
  KubePod p;
  const JsonValue meta = pod.Get("metadata");
  p.name = meta.Get("name").StringOr();
  p.ns = meta.Get("namespace").StringOr();
  if (p.name.empty()) return InvalidArgument("pod: metadata.name is missing");
  p.uid = meta.Get("uid").StringOr();
  p.resource_version = meta.Get("resourceVersion").StringOr();
  p.deleting = !meta.Get("deletionTimestamp").is_null();
  std::string indices, gpushare_idx;
  meta.Get("annotations").ForEachMember([&](std::string_view key, JsonValue v) {
    if (key == names::kAnnGpuModel) p.ask.model = v.StringOr();
    if (key == names::kAnnGpuIndices) indices = v.StringOr();
    if (key == names::kAnnGpushareIdx) gpushare_idx = v.StringOr();
    return true;
  });
  if (auto gpus = ParseGpuIndices(!indices.empty() ? indices : gpushare_idx)) {
    p.annotated_gpus = std::move(*gpus);
  }
  const JsonValue spec = pod.Get("spec");
  p.node_name = spec.Get("nodeName").StringOr();
  if (auto prio = spec.Get("priority").Int()) {
    p.priority = static_cast<int32_t>(std::clamp<int64_t>(*prio, INT32_MIN, INT32_MAX));
  }
  ReadStringMap(spec.Get("nodeSelector"), p.node_selector);
  ReadTolerations(spec.Get("tolerations"), p.tolerations);
  p.phase = pod.Get("status").Get("phase").StringOr();
  if (Status s = ReadPodAsk(spec, p); !s.ok()) {
    p.invalid = "pod " + p.Key() + ": " + s.message();
  }
  return p;
}

std::optional<std::vector<int>> ParseGpuIndices(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    auto v = ParseSmallInt(text.substr(start, comma - start));
    if (!v || *v >= 4096) return std::nullopt;
    out.push_back(static_cast<int>(*v));
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return std::nullopt;
  return out;
}

std::string FormatGpuIndices(const std::vector<int>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(gpus[i]);
  }
  return out;
}

}  // namespace gpusched::extender
