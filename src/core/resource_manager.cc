#include "core/resource_manager.h"

#include <algorithm>

#include "base/check.h"

namespace gpusched::core {

StatusOr<size_t> ResourceManager::RegisterNode(const NodeSpec& spec, TimeMs now_ms) {
  GS_ASSIGN_OR_RETURN(size_t index, state_.Upsert(spec, now_ms));
  tasks_on_node_.resize(state_.size());
  extremes_cache_.clear();
  return index;
}

void ResourceManager::RemoveNode(size_t index) {
  GS_CHECK(index < tasks_on_node_.size() && tasks_on_node_[index].empty());
  state_.Remove(index);
  tasks_on_node_.erase(tasks_on_node_.begin() + static_cast<std::ptrdiff_t>(index));
  extremes_cache_.clear();
}

const ClusterState::Extremes& ResourceManager::Extremes(int model_id) const {
  auto it = extremes_cache_.find(model_id);
  if (it == extremes_cache_.end()) {
    it = extremes_cache_.emplace(model_id, state_.ComputeExtremes(model_id)).first;
  }
  return it->second;
}

void ResourceManager::Observe(const PlacementRequest& shape) {
  const PlacementOptions& o = placer_.options();
  if (o.node_order == NodeOrder::kMinFragmentation || o.gpu_order == GpuOrder::kMinFragmentation) {
    workload_.Observe(shape);
  }
}

void ResourceManager::Grant(TaskId task, const Placement& p) {
  state_.Reserve(p);
  std::vector<TaskId>& on = tasks_on_node_[p.node_index];
  const auto at = std::lower_bound(on.begin(), on.end(), task);
  if (at == on.end() || *at != task) on.insert(at, task);
}

void ResourceManager::Return(TaskId task, const Placement& p) {
  state_.Release(p);
  std::vector<TaskId>& on = tasks_on_node_[p.node_index];
  const auto at = std::lower_bound(on.begin(), on.end(), task);
  if (at != on.end() && *at == task) on.erase(at);
}

std::optional<Placement> ResourceManager::Rebind(const Placement& p) const {
  auto index = state_.Find(p.node);
  if (!index || p.gpus.size() != p.gpu_mem_mib.size()) return std::nullopt;
  const NodeState& n = state_.node(*index);
  Resources after = n.allocated;
  after += p.resources;
  if (after.cpu_milli > n.capacity.cpu_milli || after.mem_mib > n.capacity.mem_mib) {
    return std::nullopt;
  }
  for (size_t k = 0; k < p.gpus.size(); ++k) {
    const int g = p.gpus[k];
    if (g < 0 || static_cast<size_t>(g) >= n.gpus.size() || p.gpu_mem_mib[k] < 0 ||
        n.gpus[static_cast<size_t>(g)].allocated_mib + p.gpu_mem_mib[k] >
            n.gpus[static_cast<size_t>(g)].total_mib) {
      return std::nullopt;
    }
  }
  Placement out = p;
  out.node_index = *index;
  return out;
}

}  // namespace gpusched::core
