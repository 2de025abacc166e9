#include "core/fragmentation.h"

#include <algorithm>
#include <iterator>

namespace gpusched::core {

WorkloadShape WorkloadShape::Of(const PlacementRequest& r) {
  WorkloadShape s;
  s.gpus = r.gpus;
  s.exclusive = r.exclusive;
  s.gpu_mem_mib = r.exclusive ? 0 : r.gpu_mem_mib;
  s.model_id = r.model_id;
  s.cpu_milli = r.resources.cpu_milli;
  s.mem_mib = r.resources.mem_mib;
  return s;
}

void WorkloadDistribution::Observe(const PlacementRequest& r) {
  if (r.gpus <= 0) return;
  const WorkloadShape s = WorkloadShape::Of(r);
  auto it = counts_.find(s);
  if (it == counts_.end()) {
    if (counts_.size() >= options_.max_distinct) return;
    it = counts_.emplace(s, 0).first;
  }
  ++it->second;
  ++observed_;
  Recompute();
}

void WorkloadDistribution::Recompute() {
  std::vector<std::pair<const WorkloadShape*, int64_t>> order;
  order.reserve(counts_.size());
  for (const auto& [shape, count] : counts_) order.emplace_back(&shape, count);
  // Most frequent first; the map's order (stable_sort) breaks ties.
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double want = options_.coverage * static_cast<double>(observed_);
  int64_t kept = 0;
  size_t n = 0;
  while (n < order.size() && n < std::max<size_t>(1, options_.max_shapes) &&
         (n == 0 || static_cast<double>(kept) < want)) {
    kept += order[n++].second;
  }
  typical_.clear();
  for (size_t i = 0; i < n; ++i) {
    typical_.push_back({*order[i].first,
                        static_cast<double>(order[i].second) / static_cast<double>(kept)});
  }
}

namespace {

// Idle memory is counted in millionths of a GPU, as integers, so that equal node states give
// bit-equal results whatever the order of the additions (ties then fall to the next key).
constexpr int64_t kMicro = 1'000'000;

int64_t IdleMicro(bool healthy, MiB free, MiB total) {
  return healthy && total > 0 ? std::max<MiB>(0, free) * kMicro / total : 0;
}

bool GpuTakes(const GpuState& g, MiB free, const WorkloadShape& m) {
  if (!g.healthy) return false;
  if (m.model_id >= 0 && g.model_id != m.model_id) return false;
  if (m.exclusive) return g.tasks == 0 && g.allocated_mib == 0;
  return free >= m.gpu_mem_mib;
}

}  // namespace

double ShapeFragmentation(const NodeState& node, const FilterOptions& o, const WorkloadShape& m) {
  int64_t all = 0, unfit = 0, fitting = 0;
  for (const GpuState& g : node.gpus) {
    const MiB free = EffectiveFree(g, o);
    const int64_t idle = IdleMicro(g.healthy, free, g.total_mib);
    all += idle;
    if (GpuTakes(g, free, m)) {
      ++fitting;
    } else {
      unfit += idle;
    }
  }
  const bool hosts = node.capacity.cpu_milli - node.allocated.cpu_milli >= m.cpu_milli &&
                     node.capacity.mem_mib - node.allocated.mem_mib >= m.mem_mib &&
                     fitting >= m.gpus;
  return static_cast<double>(hosts ? unfit : all) / kMicro;
}

double ExpectedFragmentation(const NodeState& node, const FilterOptions& o,
                             std::span<const WeightedShape> workload) {
  double f = 0;
  for (const WeightedShape& w : workload) f += w.p * ShapeFragmentation(node, o, w.shape);
  return f;
}

// ---------------------------------------------------------------- NodeFragmentation

bool NodeFragmentation::Takes(const Gpu& g, const WorkloadShape& m) {
  if (!g.healthy) return false;
  if (m.model_id >= 0 && g.model_id != m.model_id) return false;
  if (m.exclusive) return g.whole_free;
  return g.free >= m.gpu_mem_mib;
}

int64_t NodeFragmentation::Idle(const Gpu& g) { return IdleMicro(g.healthy, g.free, g.total); }

int64_t NodeFragmentation::Fragmentation(const WorkloadShape& m, int64_t cpu_free, MiB mem_free,
                                         const Tally& t, int64_t all_idle) {
  const bool hosts = cpu_free >= m.cpu_milli && mem_free >= m.mem_mib && t.fitting >= m.gpus;
  return hosts ? t.unfit_idle : all_idle;
}

void NodeFragmentation::Reset(const NodeState& node, const FilterOptions& o,
                              std::span<const WeightedShape> workload) {
  workload_ = workload;
  gpus_.clear();
  all_idle_ = 0;
  for (const GpuState& g : node.gpus) {
    Gpu x;
    x.free = EffectiveFree(g, o);
    x.total = g.total_mib;
    x.model_id = g.model_id;
    x.healthy = g.healthy;
    x.whole_free = g.tasks == 0 && g.allocated_mib == 0;
    all_idle_ += Idle(x);
    gpus_.push_back(x);
  }
  cpu_free_ = node.capacity.cpu_milli - node.allocated.cpu_milli;
  mem_free_ = node.capacity.mem_mib - node.allocated.mem_mib;
  tallies_.assign(workload.size(), Tally{});
  expected_ = 0;
  for (size_t i = 0; i < workload.size(); ++i) {
    Tally& t = tallies_[i];
    for (const Gpu& g : gpus_) {
      if (Takes(g, workload[i].shape)) {
        ++t.fitting;
      } else {
        t.unfit_idle += Idle(g);
      }
    }
    expected_ += workload[i].p * static_cast<double>(Fragmentation(
                                     workload[i].shape, cpu_free_, mem_free_, t, all_idle_));
  }
  expected_ /= kMicro;
}

double NodeFragmentation::Growth(const PlacementRequest& r, std::span<const int> gpus) const {
  // The GPUs as they would be after the placement.
  Gpu after[16];
  std::vector<Gpu> more;
  Gpu* changed = after;
  if (gpus.size() > std::size(after)) {
    more.resize(gpus.size());
    changed = more.data();
  }
  int64_t idle_drop = 0;
  for (size_t k = 0; k < gpus.size(); ++k) {
    Gpu g = gpus_[static_cast<size_t>(gpus[k])];
    const int64_t before = Idle(g);
    g.free = r.exclusive ? 0 : g.free - r.gpu_mem_mib;
    g.whole_free = false;
    idle_drop += before - Idle(g);
    changed[k] = g;
  }
  const int64_t cpu = cpu_free_ - r.resources.cpu_milli;
  const MiB mem = mem_free_ - r.resources.mem_mib;
  const int64_t all = all_idle_ - idle_drop;
  double growth = 0;
  for (size_t i = 0; i < workload_.size(); ++i) {
    const WorkloadShape& m = workload_[i].shape;
    Tally t = tallies_[i];
    for (size_t k = 0; k < gpus.size(); ++k) {
      const Gpu& was = gpus_[static_cast<size_t>(gpus[k])];
      const Gpu& now = changed[k];
      if (Takes(was, m)) {
        --t.fitting;
      } else {
        t.unfit_idle -= Idle(was);
      }
      if (Takes(now, m)) {
        ++t.fitting;
      } else {
        t.unfit_idle += Idle(now);
      }
    }
    const int64_t diff = Fragmentation(m, cpu, mem, t, all) -
                         Fragmentation(m, cpu_free_, mem_free_, tallies_[i], all_idle_);
    if (diff != 0) growth += workload_[i].p * static_cast<double>(diff);
  }
  return growth / kMicro;
}

}  // namespace gpusched::core
