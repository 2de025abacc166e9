#include "extender/decisions.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace gpusched::extender {
namespace {

// A GPU model no node has: matches nothing (as core's Scheduler does).
constexpr int kUnknownModel = INT_MAX;

bool Fits(const core::NodeState& n, const core::PlacementRequest& r,
          const DecisionOptions& options) {
  return core::FirstRejectingFilter(n, r, options.placement.filter) == core::kNumFilters;
}

// Whether the request could fit on this node once every pod left it (preemption can help).
bool FitsWhenEmpty(const core::NodeState& n, const core::PlacementRequest& r) {
  int64_t usable = 0;
  for (const core::GpuState& g : n.gpus) {
    if (r.model_id >= 0 && g.model_id != r.model_id) continue;
    if (r.exclusive || g.total_mib >= r.gpu_mem_mib) ++usable;
  }
  return usable >= r.gpus;
}

std::string Reason(int filter, const core::NodeState& n, const PodRequest& request,
                   bool resolvable) {
  const std::string base = std::string("gpusched: ") + core::FilterReason(filter);
  switch (filter) {
    case core::kFilterAvailable:
      return "gpusched: node is not Ready";
    case core::kFilterGpuModel:
      return base + " (" + request.model + ")";
    case core::kFilterGpuCount:
      if (n.gpus.empty()) return "gpusched: node has no GPUs";
      return base + ": the pod needs " + std::to_string(request.gpus) + ", the node has " +
             std::to_string(n.gpus.size());
    case core::kFilterGpuMemory:
      if (request.exclusive) {
        return "gpusched: too few free GPUs: the pod needs " + request.Describe();
      }
      if (!resolvable) {
        return base + ": every GPU is smaller than " + FormatSizeMiB(request.shared_mib);
      }
      return base + ": no GPU has " + FormatSizeMiB(request.shared_mib) + " free";
    default:
      return base;
  }
}

// Adds (sign = +1) or removes (-1) a placement's hold on a copy of its node.
void Apply(core::NodeState& n, const core::Placement& p, int sign) {
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    core::GpuState& g = n.gpus[static_cast<size_t>(p.gpus[i])];
    g.allocated_mib += sign * p.gpu_mem_mib[i];
    g.tasks += sign;
    n.gpu_allocated_mib += sign * p.gpu_mem_mib[i];
  }
  n.running_tasks += sign;
}

}  // namespace

core::PlacementRequest PodRequest::Core(const core::ClusterState& state) const {
  core::PlacementRequest r;
  r.gpus = gpus;
  r.gpu_mem_mib = shared_mib;
  r.exclusive = exclusive;
  if (!model.empty()) {
    const int id = state.ModelId(model);
    r.model_id = id >= 0 ? id : kUnknownModel;
  }
  r.node_selector = &node_selector;
  r.tolerations = &tolerations;
  return r;
}

std::string PodRequest::Describe() const {
  if (!wants_gpus) return "no GPU";
  if (exclusive) return std::to_string(gpus) + (gpus == 1 ? " whole GPU" : " whole GPUs");
  return FormatSizeMiB(shared_mib) + " on one GPU";
}

PodRequest MakePodRequest(const KubePod& pod, const ModelOptions& options) {
  PodRequest r;
  r.invalid = pod.invalid;
  r.model = pod.ask.model;
  r.node_selector = pod.node_selector;
  r.tolerations = pod.tolerations;
  if (!r.invalid.empty()) return r;
  if (pod.ask.whole_gpus > 0) {
    r.wants_gpus = true;
    r.exclusive = true;
    r.gpus = pod.ask.whole_gpus;
  } else if (const MiB mib = SharedMib(pod.ask, options.gpushare_unit_mib); mib > 0) {
    r.wants_gpus = true;
    r.gpus = 1;
    r.shared_mib = mib;
  }
  return r;
}

std::vector<NodeVerdict> FilterNodes(const GpuCluster& cluster, const PodRequest& request,
                                     const std::vector<std::string>& names,
                                     const DecisionOptions& options) {
  std::vector<NodeVerdict> out;
  out.reserve(names.size());
  const core::PlacementRequest r = request.Core(cluster.state());
  for (const std::string& name : names) {
    NodeVerdict v;
    v.node = name;
    const std::optional<size_t> index = cluster.Index(name);
    if (!request.invalid.empty()) {
      v.reason = "gpusched: " + request.invalid;
    } else if (!index) {
      v.resolvable = true;  // the watch may deliver it any moment
      v.reason = "gpusched: node not in the extender's node cache yet";
    } else if (const KubeNode* kn = cluster.Node(name); !kn->invalid.empty()) {
      v.reason = "gpusched: " + kn->invalid;
    } else if (!request.wants_gpus) {
      v.fits = true;
    } else if (!request.exclusive && !cluster.MemoryKnown(name)) {
      v.reason =
          "gpusched: node advertises no GPU memory (no gpusched.io/gpu-mem, aliyun.com/gpu-mem "
          "or nvidia.com/gpu.memory label)";
    } else {
      const core::NodeState& n = cluster.state().node(*index);
      const int filter = core::FirstRejectingFilter(n, r, options.placement.filter);
      v.fits = filter == core::kNumFilters;
      if (!v.fits) {
        v.resolvable = filter == core::kFilterGpuMemory && FitsWhenEmpty(n, r);
        v.reason = Reason(filter, n, request, v.resolvable);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<HostScore> ScoreNodes(const GpuCluster& cluster, const PodRequest& request,
                                  const std::vector<std::string>& names,
                                  const DecisionOptions& options) {
  std::vector<HostScore> out;
  out.reserve(names.size());
  const core::PlacementRequest r = request.Core(cluster.state());
  const bool scored = request.wants_gpus && request.invalid.empty();
  for (const std::string& name : names) {
    HostScore s{name, 0};
    const std::optional<size_t> index = cluster.Index(name);
    if (scored && index && (request.exclusive || cluster.MemoryKnown(name))) {
      const core::NodeState& n = cluster.state().node(*index);
      if (Fits(n, r, options)) {
        const double score = core::WeightedScore(options.placement.weights, n, r);
        s.score = std::clamp<int64_t>(std::llround(score / 10.0), 0, 10);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<core::Placement> ChooseGpus(const GpuCluster& cluster, const PodRequest& request,
                                     const std::string& node, const DecisionOptions& options) {
  std::vector<NodeVerdict> verdict = FilterNodes(cluster, request, {node}, options);
  if (!cluster.Index(node)) return NotFound("node " + node + " is not known to the extender");
  if (!verdict[0].fits) return FailedPrecondition(verdict[0].reason);
  core::Placement p;
  p.node_index = *cluster.Index(node);
  p.node = node;
  p.exclusive = request.exclusive;
  if (!request.wants_gpus) return p;
  const core::NodeState& n = cluster.state().node(p.node_index);
  const core::PlacementRequest r = request.Core(cluster.state());
  // CN109992422A claims 3-4: the GPUs inside the node, by the server's GPU order.
  p.gpus = core::Placer(options.placement, nullptr).PickGpus(n, r);
  for (int g : p.gpus) {
    p.gpu_mem_mib.push_back(request.exclusive ? n.gpus[static_cast<size_t>(g)].total_mib
                                              : request.shared_mib);
  }
  return p;
}

std::vector<VictimSet> ChooseVictims(const GpuCluster& cluster, const PodRequest& request,
                                     const std::vector<VictimSet>& proposals,
                                     const DecisionOptions& options) {
  if (!request.invalid.empty()) return {};
  if (!request.wants_gpus) return proposals;
  const core::PlacementRequest r = request.Core(cluster.state());
  std::vector<VictimSet> kept;
  for (const VictimSet& proposal : proposals) {
    const std::optional<size_t> index = cluster.Index(proposal.node);
    if (!index || proposal.victim_uids.empty()) continue;
    core::NodeState work = cluster.state().node(*index);
    if (Fits(work, r, options)) {  // the GPUs have room: the victims are for other resources
      kept.push_back(proposal);
      continue;
    }
    // The victims that hold GPUs here, in the proposal's order (most important first).
    std::vector<std::pair<size_t, const core::Placement*>> holders;
    for (size_t i = 0; i < proposal.victim_uids.size(); ++i) {
      const core::Placement* p = cluster.Applied(proposal.victim_uids[i]);
      if (p != nullptr && p->node == proposal.node) holders.emplace_back(i, p);
    }
    for (const auto& [i, p] : holders) Apply(work, *p, -1);
    if (!Fits(work, r, options)) continue;  // even all of them leave no GPU room
    std::vector<bool> spared(proposal.victim_uids.size(), false);
    for (const auto& [i, p] : holders) {
      Apply(work, *p, +1);
      if (Fits(work, r, options)) {
        spared[i] = true;
      } else {
        Apply(work, *p, -1);
      }
    }
    VictimSet result{proposal.node, {}, proposal.pdb_violations};
    for (size_t i = 0; i < proposal.victim_uids.size(); ++i) {
      if (!spared[i]) result.victim_uids.push_back(proposal.victim_uids[i]);
    }
    if (!result.victim_uids.empty()) kept.push_back(std::move(result));
  }
  if (kept.empty()) return kept;
  int64_t fewest = INT64_MAX;
  for (const VictimSet& v : kept) fewest = std::min(fewest, v.pdb_violations);
  std::erase_if(kept, [&](const VictimSet& v) { return v.pdb_violations != fewest; });
  return kept;
}

}  // namespace gpusched::extender
