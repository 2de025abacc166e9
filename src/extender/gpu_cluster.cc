#include "extender/gpu_cluster.h"

#include <algorithm>

namespace gpusched::extender {
namespace {

// GPUs of a node that advertises a GPU count but no memory are modelled with this size, so
// whole-GPU pods still fit and every GPU-memory ask is refused (decisions.cc says why).
constexpr MiB kUnknownGpuMib = 1;

bool WholeFree(const core::GpuState& g) { return g.tasks == 0 && g.allocated_mib == 0; }

}  // namespace

PodClaim ClaimOf(const KubePod& pod, const ModelOptions& options) {
  PodClaim c;
  c.uid = pod.uid;
  c.key = pod.Key();
  c.node = pod.node_name;
  c.priority = pod.priority;
  c.whole_gpus = pod.ask.whole_gpus;
  c.shared_mib = c.whole_gpus > 0 ? 0 : SharedMib(pod.ask, options.gpushare_unit_mib);
  c.annotated_gpus = pod.annotated_gpus;
  return c;
}

std::optional<size_t> GpuCluster::Index(const std::string& name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.index;
}

const KubeNode* GpuCluster::Node(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second.node;
}

bool GpuCluster::MemoryKnown(const std::string& name) const {
  auto it = nodes_.find(name);
  return it != nodes_.end() && it->second.memory_known;
}

const PodClaim* GpuCluster::Pod(const std::string& uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second;
}

const core::Placement* GpuCluster::Applied(const std::string& uid) const {
  const PodClaim* claim = Pod(uid);
  if (claim == nullptr) return nullptr;
  auto node = nodes_.find(claim->node);
  if (node == nodes_.end()) return nullptr;
  auto it = node->second.applied.find(uid);
  return it == node->second.applied.end() ? nullptr : &it->second;
}

std::vector<std::string> GpuCluster::PodsOn(const std::string& node) const {
  auto it = pods_by_node_.find(node);
  if (it == pods_by_node_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

void GpuCluster::UpsertNode(const KubeNode& node) {
  auto [it, inserted] = nodes_.try_emplace(node.name);
  NodeEntry& entry = it->second;
  // Release first, so a node that lost GPUs or memory is never below its reservations.
  for (const auto& [uid, placement] : entry.applied) state_.Release(placement);
  entry.applied.clear();
  entry.node = node;
  const MiB mib = EffectiveMibPerGpu(node, options_.gpushare_unit_mib);
  entry.memory_known = mib > 0 || node.gpu_count == 0;
  core::NodeSpec spec;
  spec.name = node.name;
  spec.gpus.assign(static_cast<size_t>(node.gpu_count),
                   core::GpuSpec{node.gpu_model, mib > 0 ? mib : kUnknownGpuMib});
  spec.labels = node.labels;
  spec.taints = node.taints;
  // Cannot fail: the name is set, capacities are 0, GPU sizes > 0 and nothing is reserved.
  entry.index = *state_.Upsert(spec, 0);
  state_.Update(entry.index, [&](core::NodeState& s) {
    s.available = node.ready;
    s.reachable = true;
  });
  Reapply(entry);
}

void GpuCluster::RemoveNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  for (const auto& [uid, placement] : it->second.applied) state_.Release(placement);
  overcommitted_ -= it->second.overcommitted;
  // ClusterState keeps its slot (it has no removal); the node is unknown to every lookup
  // here and marked unreachable there. A node of the same name later reuses the slot.
  state_.Update(it->second.index, [](core::NodeState& s) { s.reachable = false; });
  nodes_.erase(it);
}

void GpuCluster::UpsertPod(PodClaim claim) {
  RemovePod(claim.uid);
  const std::string node = claim.node;
  pods_by_node_[node].insert(claim.uid);
  pods_.emplace(claim.uid, std::move(claim));
  if (auto it = nodes_.find(node); it != nodes_.end()) Reapply(it->second);
}

void GpuCluster::RemovePod(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  const std::string node = it->second.node;
  pods_.erase(it);
  auto by_node = pods_by_node_.find(node);
  if (by_node != pods_by_node_.end()) {
    by_node->second.erase(uid);
    if (by_node->second.empty()) pods_by_node_.erase(by_node);
  }
  if (auto n = nodes_.find(node); n != nodes_.end()) Reapply(n->second);
}

void GpuCluster::Reapply(NodeEntry& entry) {
  for (const auto& [uid, placement] : entry.applied) state_.Release(placement);
  entry.applied.clear();
  std::vector<const PodClaim*> claims;
  if (auto it = pods_by_node_.find(entry.node.name); it != pods_by_node_.end()) {
    for (const std::string& uid : it->second) claims.push_back(&pods_.at(uid));
  }
  // Pods whose annotations say where they are go first; the rest fill in around them.
  std::stable_sort(claims.begin(), claims.end(), [](const PodClaim* a, const PodClaim* b) {
    return !a->annotated_gpus.empty() && b->annotated_gpus.empty();
  });
  overcommitted_ -= entry.overcommitted;
  entry.overcommitted = 0;
  for (const PodClaim* claim : claims) {
    bool over = false;
    core::Placement p = PlaceClaim(state_.node(entry.index), *claim, over);
    entry.overcommitted += over ? 1 : 0;
    p.node_index = entry.index;
    p.node = entry.node.name;
    state_.Reserve(p);
    entry.applied.emplace(claim->uid, std::move(p));
  }
  overcommitted_ += entry.overcommitted;
}

core::Placement GpuCluster::PlaceClaim(const core::NodeState& n, const PodClaim& claim,
                                       bool& overcommitted) {
  core::Placement p;
  const auto gpu_count = static_cast<int>(n.gpus.size());
  const auto valid = [&](const std::vector<int>& gpus) {
    return std::all_of(gpus.begin(), gpus.end(), [&](int g) { return g < gpu_count; });
  };
  if (claim.whole_gpus > 0) {
    p.exclusive = true;
    const std::vector<int>& want = claim.annotated_gpus;
    const bool annotated_ok =
        static_cast<int64_t>(want.size()) == claim.whole_gpus && valid(want) &&
        std::all_of(want.begin(), want.end(),
                    [&](int g) { return WholeFree(n.gpus[static_cast<size_t>(g)]); });
    if (annotated_ok) {
      p.gpus = want;
    } else {
      for (const core::GpuState& g : n.gpus) {
        if (static_cast<int64_t>(p.gpus.size()) == claim.whole_gpus) break;
        if (WholeFree(g)) p.gpus.push_back(g.index);
      }
    }
    overcommitted = static_cast<int64_t>(p.gpus.size()) < claim.whole_gpus;
    for (int g : p.gpus) p.gpu_mem_mib.push_back(n.gpus[static_cast<size_t>(g)].total_mib);
    return p;
  }
  if (claim.shared_mib <= 0 || gpu_count == 0) return p;
  int gpu = -1;
  if (claim.annotated_gpus.size() == 1 && valid(claim.annotated_gpus)) {
    gpu = claim.annotated_gpus[0];
  } else {
    MiB best_free = -1;
    for (const core::GpuState& g : n.gpus) {
      if (g.accounted_free() > best_free) {
        best_free = g.accounted_free();
        gpu = g.index;
      }
    }
  }
  const MiB free = n.gpus[static_cast<size_t>(gpu)].accounted_free();
  overcommitted = free < claim.shared_mib;
  p.gpus = {gpu};
  p.gpu_mem_mib = {std::min(free, claim.shared_mib)};
  return p;
}

}  // namespace gpusched::extender
