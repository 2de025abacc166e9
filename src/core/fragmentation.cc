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

// How many tasks of shape m the free CPU, RAM and GPU shares of a node hold together.
int64_t Copies(const WorkloadShape& m, int64_t cpu_free, MiB mem_free, int64_t slots) {
  int64_t k = m.gpus > 0 ? slots / m.gpus : 0;
  if (m.cpu_milli > 0) k = std::min(k, std::max<int64_t>(0, cpu_free) / m.cpu_milli);
  if (m.mem_mib > 0) k = std::min<int64_t>(k, std::max<MiB>(0, mem_free) / m.mem_mib);
  return k;
}

}  // namespace

const char* FragmentationMeasureName(FragmentationMeasure m) {
  switch (m) {
    case FragmentationMeasure::kNextTask: return "next_task";
    case FragmentationMeasure::kPacking: return "packing";
  }
  return "unknown";
}

double ShapeFragmentation(const NodeState& node, const FilterOptions& o, const WorkloadShape& m,
                          FragmentationMeasure measure) {
  const WeightedShape one[] = {{m, 1.0}};
  NodeFragmentation frag(one, measure);
  frag.Reset(node, o);
  return frag.Expected();
}

double ExpectedFragmentation(const NodeState& node, const FilterOptions& o,
                             std::span<const WeightedShape> workload,
                             FragmentationMeasure measure) {
  NodeFragmentation frag(workload, measure);
  frag.Reset(node, o);
  return frag.Expected();
}

// ---------------------------------------------------------------- NodeFragmentation

NodeFragmentation::NodeFragmentation(std::span<const WeightedShape> workload,
                                     FragmentationMeasure measure)
    : workload_(workload), measure_(measure) {
  const auto demand = [](const WorkloadShape& m) {
    return GpuDemand{m.exclusive ? 0 : m.gpu_mem_mib, m.exclusive, m.model_id};
  };
  for (const WeightedShape& w : workload) demands_.push_back(demand(w.shape));
  std::sort(demands_.begin(), demands_.end());
  demands_.erase(std::unique(demands_.begin(), demands_.end()), demands_.end());
  demand_of_.reserve(workload.size());
  for (const WeightedShape& w : workload) {
    demand_of_.push_back(static_cast<size_t>(
        std::lower_bound(demands_.begin(), demands_.end(), demand(w.shape)) - demands_.begin()));
  }
  share_.resize(demands_.size());
  tallies_.resize(demands_.size());
  now_.resize(workload.size());
}

bool NodeFragmentation::Takes(const Gpu& g, const GpuDemand& d) {
  if (!g.healthy) return false;
  if (d.model_id >= 0 && g.model_id != d.model_id) return false;
  if (d.exclusive) return g.whole_free;
  return g.free >= d.gpu_mem_mib;
}

int64_t NodeFragmentation::Slots(const Gpu& g, const GpuDemand& d) {
  if (!Takes(g, d)) return 0;
  if (d.exclusive || d.gpu_mem_mib <= 0) return 1;
  return g.free / d.gpu_mem_mib;
}

int64_t NodeFragmentation::Idle(const Gpu& g) { return IdleMicro(g.healthy, g.free, g.total); }

void NodeFragmentation::Add(const Gpu& g, int sign, std::span<Tally> tallies) const {
  const int64_t idle = Idle(g);
  for (size_t d = 0; d < demands_.size(); ++d) {
    Tally& t = tallies[d];
    if (Takes(g, demands_[d])) {
      t.fitting += sign;
    } else {
      t.unfit_idle += sign * idle;
    }
    t.slots += sign * Slots(g, demands_[d]);
  }
}

int64_t NodeFragmentation::Fragmentation(size_t shape, int64_t cpu_free, MiB mem_free,
                                         const Tally& t, int64_t all_idle) const {
  const WorkloadShape& m = workload_[shape].shape;
  if (measure_ == FragmentationMeasure::kPacking) {
    const int64_t used =
        Copies(m, cpu_free, mem_free, t.slots) * m.gpus * share_[demand_of_[shape]];
    return all_idle - std::min(all_idle, used);
  }
  const bool hosts = cpu_free >= m.cpu_milli && mem_free >= m.mem_mib && t.fitting >= m.gpus;
  return hosts ? t.unfit_idle : all_idle;
}

void NodeFragmentation::Reset(const NodeState& node, const FilterOptions& o) {
  gpus_.clear();
  all_idle_ = 0;
  MiB largest = 0;
  std::fill(tallies_.begin(), tallies_.end(), Tally{});
  for (const GpuState& g : node.gpus) {
    Gpu x;
    x.free = EffectiveFree(g, o);
    x.total = g.total_mib;
    x.model_id = g.model_id;
    x.healthy = g.healthy;
    x.whole_free = g.tasks == 0 && g.allocated_mib == 0;
    all_idle_ += Idle(x);
    largest = std::max(largest, x.total);
    Add(x, +1, tallies_);
    gpus_.push_back(x);
  }
  for (size_t d = 0; d < demands_.size(); ++d) {
    share_[d] = demands_[d].exclusive ? kMicro
                : largest > 0         ? std::min<int64_t>(kMicro, demands_[d].gpu_mem_mib * kMicro / largest)
                                      : 0;
  }
  cpu_free_ = node.capacity.cpu_milli - node.allocated.cpu_milli;
  mem_free_ = node.capacity.mem_mib - node.allocated.mem_mib;
  expected_ = 0;
  for (size_t i = 0; i < workload_.size(); ++i) {
    now_[i] = Fragmentation(i, cpu_free_, mem_free_, tallies_[demand_of_[i]], all_idle_);
    expected_ += workload_[i].p * static_cast<double>(now_[i]);
  }
  expected_ /= kMicro;
}

double NodeFragmentation::Growth(const PlacementRequest& r, std::span<const int> gpus) const {
  // The tallies as they would be after the placement.
  Tally fixed[64];
  std::vector<Tally> more;
  std::span<Tally> after(fixed, std::min(std::size(fixed), demands_.size()));
  if (demands_.size() > std::size(fixed)) {
    more.resize(demands_.size());
    after = more;
  }
  std::copy(tallies_.begin(), tallies_.end(), after.begin());
  int64_t idle_drop = 0;
  for (const int index : gpus) {
    const Gpu& was = gpus_[static_cast<size_t>(index)];
    Gpu now = was;
    now.free = r.exclusive ? 0 : was.free - r.gpu_mem_mib;
    now.whole_free = false;
    idle_drop += Idle(was) - Idle(now);
    Add(was, -1, after);
    Add(now, +1, after);
  }
  const int64_t cpu = cpu_free_ - r.resources.cpu_milli;
  const MiB mem = mem_free_ - r.resources.mem_mib;
  const int64_t all = all_idle_ - idle_drop;
  double growth = 0;
  for (size_t i = 0; i < workload_.size(); ++i) {
    const int64_t diff = Fragmentation(i, cpu, mem, after[demand_of_[i]], all) - now_[i];
    if (diff != 0) growth += workload_[i].p * static_cast<double>(diff);
  }
  return growth / kMicro;
}

}  // namespace gpusched::core
