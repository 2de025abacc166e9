#include "core/cluster_state.h"

#include <algorithm>

#include "base/check.h"

namespace gpusched::core {

int ClusterState::InternModel(const std::string& model) {
  auto [it, inserted] = model_ids_.emplace(model, static_cast<int>(models_.size()));
  if (inserted) models_.push_back(model);
  return it->second;
}

int ClusterState::ModelId(const std::string& model) const {
  auto it = model_ids_.find(model);
  return it == model_ids_.end() ? -1 : it->second;
}

std::optional<size_t> ClusterState::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

namespace {

// What a registration says of itself, before it touches the table.
Status ValidateNodeSpec(const NodeSpec& spec) {
  if (spec.name.empty()) return InvalidArgument("node.name: must be set");
  if (spec.capacity.cpu_milli < 0 || spec.capacity.mem_mib < 0) {
    return InvalidArgument("node " + spec.name + ": capacity must be >= 0");
  }
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    if (spec.gpus[i].total_mib <= 0) {
      return InvalidArgument("node " + spec.name + ": gpus[" + std::to_string(i) +
                             "].total_mib must be > 0, got " +
                             std::to_string(spec.gpus[i].total_mib));
    }
  }
  if (!spec.topology.empty() && spec.topology.gpus != static_cast<int>(spec.gpus.size())) {
    return InvalidArgument("node " + spec.name + ": topology of " +
                           std::to_string(spec.topology.gpus) + " GPUs for " +
                           std::to_string(spec.gpus.size()) + " GPUs");
  }
  if (Status s = ValidateTopology(spec.topology); !s.ok()) {
    return InvalidArgument("node " + spec.name + ": " + s.message());
  }
  return Status::Ok();
}

// A registration again under a known name may not take away what its reservations hold:
// GPUs, GPU memory, CPU or RAM (issue 40: allocated above capacity broke the fit filters).
Status CheckNoShrinkBelowReservations(const NodeSpec& spec, const NodeState& n) {
  for (size_t g = spec.gpus.size(); g < n.gpus.size(); ++g) {
    if (n.gpus[g].allocated_mib > 0) {
      return FailedPrecondition("node " + spec.name + ": gpu " + std::to_string(g) +
                                " disappeared while it holds reservations");
    }
  }
  for (size_t g = 0; g < std::min(spec.gpus.size(), n.gpus.size()); ++g) {
    if (spec.gpus[g].total_mib < n.gpus[g].allocated_mib) {
      return FailedPrecondition("node " + spec.name + ": gpu " + std::to_string(g) +
                                " shrank below its reservations");
    }
  }
  auto shrank = [&](const char* field, int64_t capacity, int64_t allocated) {
    return FailedPrecondition("node " + spec.name + ": " + field + " " +
                              std::to_string(capacity) + " shrank below its reservations of " +
                              std::to_string(allocated));
  };
  if (spec.capacity.cpu_milli < n.allocated.cpu_milli) {
    return shrank("cpu_milli", spec.capacity.cpu_milli, n.allocated.cpu_milli);
  }
  if (spec.capacity.mem_mib < n.allocated.mem_mib) {
    return shrank("mem_mib", spec.capacity.mem_mib, n.allocated.mem_mib);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<size_t> ClusterState::Upsert(const NodeSpec& spec, TimeMs now_ms) {
  GS_RETURN_IF_ERROR(ValidateNodeSpec(spec));
  auto existing = Find(spec.name);
  size_t index;
  if (existing) {
    index = *existing;
    GS_RETURN_IF_ERROR(CheckNoShrinkBelowReservations(spec, nodes_[index]));
  } else {
    index = nodes_.size();
    nodes_.emplace_back();
    summaries_.emplace_back();
    by_name_[spec.name] = index;
  }
  NodeState& n = nodes_[index];
  n.name = spec.name;
  n.address = spec.address;
  n.capacity = spec.capacity;
  n.labels = spec.labels;
  n.taints = spec.taints;
  SetGpus(n, spec.gpus);
  n.topology = spec.topology;
  n.inv_cpu = n.capacity.cpu_milli > 0 ? 1.0 / static_cast<double>(n.capacity.cpu_milli) : 0;
  n.inv_mem = n.capacity.mem_mib > 0 ? 1.0 / static_cast<double>(n.capacity.mem_mib) : 0;
  n.inv_gpu_mem = n.gpu_total_mib > 0 ? 1.0 / static_cast<double>(n.gpu_total_mib) : 0;
  n.available = true;
  n.lost = false;
  n.last_heartbeat_ms = now_ms;
  if (!existing) RankNewName(index);
  Summarize(index);
  return index;
}

// The node's GPUs as registered, keeping what the table knows of those it had: their
// reservations, tasks and health (until the agent's next heartbeat says).
void ClusterState::SetGpus(NodeState& n, const std::vector<GpuSpec>& specs) {
  std::vector<GpuState> gpus(specs.size());
  n.gpu_total_mib = 0;
  n.max_gpu_total_mib = 0;
  for (size_t g = 0; g < specs.size(); ++g) {
    gpus[g].index = static_cast<int>(g);
    gpus[g].model_id = InternModel(specs[g].model);
    gpus[g].total_mib = specs[g].total_mib;
    if (g < n.gpus.size()) {
      gpus[g].allocated_mib = n.gpus[g].allocated_mib;
      gpus[g].tasks = n.gpus[g].tasks;
      gpus[g].healthy = n.gpus[g].healthy;
      gpus[g].last_error = n.gpus[g].last_error;
    }
    n.gpu_total_mib += gpus[g].total_mib;
    n.max_gpu_total_mib = std::max(n.max_gpu_total_mib, gpus[g].total_mib);
  }
  n.gpus = std::move(gpus);
}

// Inserts the new node's name into the name order: a binary search, then every later rank
// moves up by one (integer work only, O(nodes) per registration).
void ClusterState::RankNewName(size_t index) {
  const std::string& name = nodes_[index].name;
  auto pos = std::lower_bound(
      name_order_.begin(), name_order_.end(), name,
      [&](size_t i, const std::string& n) { return nodes_[i].name < n; });
  const auto rank = static_cast<uint32_t>(pos - name_order_.begin());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i != index && nodes_[i].name_rank >= rank) {
      ++nodes_[i].name_rank;
      ++summaries_[i].name_rank;
    }
  }
  name_order_.insert(pos, index);
  nodes_[index].name_rank = rank;
}

void ClusterState::Remove(size_t index) {
  GS_CHECK(!holding_index_);  // it renumbers the nodes the hold lists
  GS_CHECK(index < nodes_.size());
  const NodeState& gone = nodes_[index];
  GS_CHECK(gone.allocated.cpu_milli == 0 && gone.allocated.mem_mib == 0 &&
           gone.gpu_allocated_mib == 0);
  if (summaries_[index].reachable) --reachable_count_;
  const uint32_t rank = gone.name_rank;
  by_name_.erase(gone.name);
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(index));
  summaries_.erase(summaries_.begin() + static_cast<std::ptrdiff_t>(index));
  name_order_.erase(name_order_.begin() + rank);
  for (size_t& i : name_order_) {
    if (i > index) --i;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name_rank > rank) {
      --nodes_[i].name_rank;
      --summaries_[i].name_rank;
    }
    if (i >= index) by_name_[nodes_[i].name] = i;
  }
  if (keep_index_) index_.Rebuild(nodes_, summaries_);
}

void ClusterState::Summarize(size_t index) {
  const NodeState& n = nodes_[index];
  NodeSummary& s = summaries_[index];
  if (s.reachable != n.reachable) {  // a new node's summary starts unreachable
    if (n.reachable) {
      ++reachable_count_;
    } else {
      --reachable_count_;
    }
  }
  s.reachable = n.reachable;
  s.available = n.available;
  s.unschedulable = n.cordoned || n.draining;
  s.schedulable = n.reachable && n.available && !s.unschedulable;
  s.has_taints = !n.taints.empty();
  s.has_labels = !n.labels.empty();
  s.gpu_count = static_cast<int32_t>(n.gpus.size());
  s.model_id = n.gpus.empty() ? -1 : n.gpus[0].model_id;
  s.whole_free_gpus = 0;
  s.max_gpu_free_mib = 0;
  s.unhealthy_gpus = 0;
  for (const GpuState& g : n.gpus) {
    if (g.model_id != s.model_id) s.model_id = -1;
    if (!g.healthy) {
      ++s.unhealthy_gpus;
      continue;
    }
    if (g.tasks == 0 && g.allocated_mib == 0) ++s.whole_free_gpus;
    s.max_gpu_free_mib = std::max(s.max_gpu_free_mib, g.accounted_free());
  }
  s.running_tasks = n.running_tasks;
  s.name_rank = n.name_rank;
  s.cpu_alloc = n.allocated.cpu_milli;
  s.mem_alloc = n.allocated.mem_mib;
  s.cpu_free = n.capacity.cpu_milli - n.allocated.cpu_milli;
  s.mem_free = n.capacity.mem_mib - n.allocated.mem_mib;
  s.gpu_alloc_mib = n.gpu_allocated_mib;
  s.gpu_total_mib = n.gpu_total_mib;
  s.max_gpu_total_mib = n.max_gpu_total_mib;
  s.inv_cpu = n.inv_cpu;
  s.inv_mem = n.inv_mem;
  s.inv_gpu_mem = n.inv_gpu_mem;
  if (!keep_index_) return;
  if (holding_index_) {
    held_.push_back(index);
    return;
  }
  index_.Update(nodes_, summaries_, index);
}

void ClusterState::KeepIndex(bool keep) {
  GS_CHECK(!holding_index_);
  if (keep && !keep_index_) index_.Rebuild(nodes_, summaries_);
  if (!keep) index_ = NodeIndex();
  keep_index_ = keep;
}

ClusterState::IndexHold::IndexHold(ClusterState& state) : state_(state) {
  GS_CHECK(!state_.holding_index_);
  state_.holding_index_ = true;
}

ClusterState::IndexHold::~IndexHold() {
  state_.holding_index_ = false;
  // Each changed node once, in index order (the index is built alike on every run).
  std::sort(state_.held_.begin(), state_.held_.end());
  state_.held_.erase(std::unique(state_.held_.begin(), state_.held_.end()), state_.held_.end());
  state_.index_.UpdateMany(state_.nodes_, state_.summaries_, state_.held_);
  state_.held_.clear();
}

void ClusterState::Reserve(const Placement& p) {
  NodeState& n = nodes_[p.node_index];
  n.allocated += p.resources;
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    GpuState& gpu = n.gpus[static_cast<size_t>(p.gpus[i])];
    gpu.allocated_mib += p.gpu_mem_mib[i];
    gpu.tasks += 1;
    n.gpu_allocated_mib += p.gpu_mem_mib[i];
    GS_CHECK(gpu.allocated_mib <= gpu.total_mib);
  }
  n.running_tasks += 1;
  Summarize(p.node_index);
}

void ClusterState::Release(const Placement& p) {
  NodeState& n = nodes_[p.node_index];
  n.allocated -= p.resources;
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    GpuState& gpu = n.gpus[static_cast<size_t>(p.gpus[i])];
    gpu.allocated_mib -= p.gpu_mem_mib[i];
    gpu.tasks -= 1;
    n.gpu_allocated_mib -= p.gpu_mem_mib[i];
    GS_CHECK(gpu.allocated_mib >= 0 && gpu.tasks >= 0);
  }
  n.running_tasks -= 1;
  GS_CHECK(n.running_tasks >= 0 && n.allocated.cpu_milli >= 0 && n.allocated.mem_mib >= 0);
  Summarize(p.node_index);
}

ClusterState::Extremes ClusterState::ComputeExtremes(int model_id) const {
  Extremes e;
  for (const NodeState& n : nodes_) {
    int64_t count = 0;
    for (const GpuState& g : n.gpus) {
      if (model_id >= 0 && g.model_id != model_id) continue;
      ++count;
      e.max_gpu_mib = std::max(e.max_gpu_mib, g.total_mib);
    }
    e.max_gpus = std::max(e.max_gpus, count);
    e.max_capacity.cpu_milli = std::max(e.max_capacity.cpu_milli, n.capacity.cpu_milli);
    e.max_capacity.mem_mib = std::max(e.max_capacity.mem_mib, n.capacity.mem_mib);
  }
  return e;
}

Status ClusterState::CheckInvariants() const {
  for (const NodeState& n : nodes_) {
    if (n.allocated.cpu_milli < 0 || n.allocated.cpu_milli > n.capacity.cpu_milli) {
      return Internal("node " + n.name + ": cpu over-committed");
    }
    if (n.allocated.mem_mib < 0 || n.allocated.mem_mib > n.capacity.mem_mib) {
      return Internal("node " + n.name + ": memory over-committed");
    }
    MiB sum = 0;
    for (const GpuState& g : n.gpus) {
      if (g.allocated_mib < 0 || g.allocated_mib > g.total_mib) {
        return Internal("node " + n.name + " gpu " + std::to_string(g.index) +
                        ": GPU memory over-committed");
      }
      sum += g.allocated_mib;
    }
    if (sum != n.gpu_allocated_mib) return Internal("node " + n.name + ": GPU sum mismatch");
  }
  return CheckIndex();
}

// The name index, the name order and the reachable count agree with the table (issue 39:
// Remove renumbers all three).
Status ClusterState::CheckIndex() const {
  if (by_name_.size() != nodes_.size() || name_order_.size() != nodes_.size()) {
    return Internal("cluster index: sizes differ from the node table");
  }
  size_t reachable = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeState& n = nodes_[i];
    auto it = by_name_.find(n.name);
    if (it == by_name_.end() || it->second != i || n.name_rank >= name_order_.size() ||
        name_order_[n.name_rank] != i || summaries_[i].name_rank != n.name_rank) {
      return Internal("node " + n.name + ": name index out of date");
    }
    if (summaries_[i].reachable) ++reachable;
  }
  if (reachable != reachable_count_) return Internal("cluster index: reachable count is off");
  if (keep_index_ && !index_.Consistent(nodes_, summaries_)) {
    return Internal("node index: a node is missing or in the class of another state");
  }
  return Status::Ok();
}

}  // namespace gpusched::core
