#include "core/placement.h"

#include "core/topology_pick.h"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace gpusched::core {

namespace {

// Appends `v` as printf's "%.1f" would (std::to_chars is specified so), without parsing a
// format: a pass describes every placement it makes.
void AppendOneDecimal(std::string& out, double v) {
  char buf[320];  // DBL_MAX has 309 digits
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 1);
  out.append(buf, ec == std::errc() ? end : buf);
}

}  // namespace

std::string DescribeReport(const PlacementReport& report, bool whole_gpus) {
  if (!report.chosen_node.empty()) {
    std::string out;
    out.reserve(64 + 32 * report.breakdown.size() + report.topology_rule.size());
    out += "placed on ";
    out += report.chosen_node;
    out += " (score ";
    AppendOneDecimal(out, report.score);
    for (size_t i = 0; i < report.breakdown.size(); ++i) {
      out += i == 0 ? ": " : ", ";
      out += report.breakdown[i].name;
      out += ' ';
      AppendOneDecimal(out, report.breakdown[i].value);
    }
    out += ")";
    if (!report.topology_rule.empty()) out += "; " + report.topology_rule;
    return out;
  }
  std::string out = std::to_string(report.feasible_nodes) + "/" +
                    std::to_string(report.total_nodes) + " nodes fit";
  // Largest counts first, ties in pipeline order.
  std::vector<int> order;
  for (int f = 0; f < kNumFilters; ++f) {
    if (report.rejected[f] > 0) order.push_back(f);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return report.rejected[a] > report.rejected[b]; });
  for (size_t i = 0; i < order.size(); ++i) {
    const bool busy = whole_gpus && order[i] == kFilterGpuMemory;
    out += (i == 0 ? ": " : ", ") + std::to_string(report.rejected[order[i]]) + " " +
           (busy ? "too few free GPUs (in use by other tasks)" : FilterReason(order[i]));
  }
  return out;
}

const char* PlaceOutcomeName(PlaceOutcome outcome) {
  switch (outcome) {
    case PlaceOutcome::kPlaced: return "placed";
    case PlaceOutcome::kRetryLater: return "retry later";
    case PlaceOutcome::kInfeasible: return "infeasible";
  }
  return "unknown";
}

namespace {

PlaceOutcome NotPlacedOutcome(const PlacementReport& report) {
  if (report.total_nodes == 0) return PlaceOutcome::kRetryLater;
  for (int f = 0; f < kNumFilters; ++f) {
    if (report.rejected[f] > 0 && !RejectsForWhatTheNodeIs(f)) return PlaceOutcome::kRetryLater;
  }
  return PlaceOutcome::kInfeasible;
}

}  // namespace

Placer::Candidate Placer::Rank(const NodeSummary& n, size_t index,
                               const PlacementRequest& r) const {
  Candidate c;
  c.index = index;
  if (options_.node_order == NodeOrder::kLoadBalance) {
    c.primary = n.running_tasks;
    c.secondary = static_cast<double>(n.gpu_alloc_mib) * n.inv_gpu_mem;
    return c;
  }
  c.primary = -WeightedScoreFast(options_.weights, n, r);
  return c;
}

bool Placer::Better(const ClusterState& cluster, const Candidate& a, const Candidate& b) const {
  if (b.index == SIZE_MAX) return a.index != SIZE_MAX;
  if (a.index == SIZE_MAX) return false;
  if (a.primary != b.primary) return a.primary < b.primary;
  if (a.secondary != b.secondary) return a.secondary < b.secondary;
  return cluster.summary(a.index).name_rank < cluster.summary(b.index).name_rank;
}

namespace {

// Whether two GPUs look the same to the fragmentation measure.
bool SameState(const GpuState& a, const GpuState& b, const FilterOptions& o) {
  return a.healthy == b.healthy && a.model_id == b.model_id && a.total_mib == b.total_mib &&
         EffectiveFree(a, o) == EffectiveFree(b, o) &&
         (a.tasks == 0 && a.allocated_mib == 0) == (b.tasks == 0 && b.allocated_mib == 0);
}

// GPU memory used on the node after the request, as a fraction (the best-fit key).
double UsedAfter(const NodeSummary& s, const PlacementRequest& r) {
  const MiB req = r.gpus == 0     ? 0
                  : r.exclusive ? r.gpus * s.max_gpu_total_mib
                                : r.gpus * r.gpu_mem_mib;
  return static_cast<double>(s.gpu_alloc_mib + req) * s.inv_gpu_mem;
}

}  // namespace

Placer::Candidate Placer::RankByFragmentation(const NodeState& n, const NodeSummary& s,
                                              size_t index, const PlacementRequest& r,
                                              std::span<const WeightedShape> workload,
                                              NodeFragmentation* frag) const {
  Candidate c;
  c.index = index;
  c.secondary = -UsedAfter(s, r);
  if (workload.empty()) return c;
  std::vector<int> gpus;
  if (r.gpus > 0) {
    double first_growth = 0;
    const std::vector<int> order = OrderGpus(n, r, workload, frag, &first_growth);
    gpus = PickByTopology(n, order, r.gpus, nullptr);
    if (options_.gpu_order == GpuOrder::kMinFragmentation && gpus.size() == 1 &&
        !order.empty() && gpus[0] == order[0]) {
      c.primary = first_growth;  // already measured by the GPU order
      return c;
    }
  }
  if (options_.gpu_order != GpuOrder::kMinFragmentation || r.gpus == 0) {
    frag->Reset(n, options_.filter);
  }
  c.primary = frag->Growth(r, gpus);
  return c;
}

void Placer::ScanChunk(const ClusterState& cluster, const PlacementRequest& r,
                       std::span<const WeightedShape> workload, size_t begin, size_t end,
                       ChunkResult* out) const {
  const auto& nodes = cluster.nodes();
  const auto& summaries = cluster.summaries();
  const bool by_fragmentation = options_.node_order == NodeOrder::kMinFragmentation;
  NodeFragmentation frag(workload, options_.fragmentation);
  for (size_t i = begin; i < end; ++i) {
    const int rejected_by = FirstRejectingFilterFast(summaries[i], nodes[i], r, options_.filter);
    if (rejected_by != kNumFilters) {
      ++out->rejected[rejected_by];
      continue;
    }
    ++out->feasible;
    const Candidate c = by_fragmentation
                            ? RankByFragmentation(nodes[i], summaries[i], i, r, workload, &frag)
                            : Rank(summaries[i], i, r);
    if (Better(cluster, c, out->best)) out->best = c;
  }
}

Placer::Candidate Placer::Scan(const ClusterState& cluster, const PlacementRequest& r,
                               std::span<const WeightedShape> shapes,
                               PlacementReport* report) const {
  const size_t n = cluster.size();
  // CN115981827A claim 1: the threshold applies to M, the nodes that passed the probe. The
  // chunks still cover every node (an unreachable one costs one flag test and is counted).
  const size_t m = cluster.reachable_count();
  if (executor_ == nullptr || executor_->concurrency() <= 1 || m <= options_.parallel_threshold) {
    ChunkResult all;
    ScanChunk(cluster, r, shapes, 0, n, &all);
    report->rejected = all.rejected;
    report->feasible_nodes = all.feasible;
    return all.best;
  }
  const size_t chunks = std::max<size_t>(1, options_.parallel_chunks);
  const size_t per_chunk = (n + chunks - 1) / chunks;
  std::vector<ChunkResult> parts(chunks);
  executor_->ParallelFor(chunks, [&](size_t c) {
    const size_t begin = std::min(n, c * per_chunk);
    ScanChunk(cluster, r, shapes, begin, std::min(n, begin + per_chunk), &parts[c]);
  });
  Candidate best;
  for (const ChunkResult& part : parts) {
    for (int f = 0; f < kNumFilters; ++f) report->rejected[f] += part.rejected[f];
    report->feasible_nodes += part.feasible;
    if (Better(cluster, part.best, best)) best = part.best;
  }
  report->chunks_used = chunks;
  return best;
}

void Placer::ExplainChoice(const NodeState& node, const Candidate& best,
                           const PlacementRequest& r, PlacementReport* report) const {
  if (options_.node_order == NodeOrder::kWeightedScore) {
    report->score = -best.primary;
    for (int s = 0; s < kNumScorers; ++s) {
      if (options_.weights.weight[s] == 0) continue;
      report->breakdown.push_back(
          {ScorerName(s), ScorerValue(s, node, r), options_.weights.weight[s]});
    }
  } else if (options_.node_order == NodeOrder::kMinFragmentation) {
    report->score = -best.primary;
    report->breakdown.push_back({"FragmentationGrowthMilliGpu", 1000 * best.primary, 1});
    report->breakdown.push_back({"GpuMemoryUsedAfter", -100 * best.secondary, 1});
  } else {
    report->breakdown.push_back({"RunningTasks", best.primary, 1});
    report->breakdown.push_back({"MeanGpuOccupancy", best.secondary * 100, 1});
  }
}

PlacementResult Placer::Place(const ClusterState& cluster, const PlacementRequest& r,
                              const WorkloadDistribution* workload) const {
  const std::span<const WeightedShape> shapes =
      workload != nullptr ? std::span<const WeightedShape>(workload->typical())
                          : std::span<const WeightedShape>();
  PlacementResult result;
  result.report.total_nodes = static_cast<int64_t>(cluster.size());
  Candidate best;
  const bool indexed = UsesIndex(cluster);
  if (indexed) best = IndexedBest(cluster, r, &result.report);
  if (best.index == SIZE_MAX) {
    // No node fits (or no index): the scan counts every filter's rejections for `why`. The
    // index looked past no feasible node, so the scan finds none either.
    result.report = PlacementReport();
    result.report.total_nodes = static_cast<int64_t>(cluster.size());
    const Candidate scanned = Scan(cluster, r, shapes, &result.report);
    if (!indexed) best = scanned;
    result.report.examined_nodes = result.report.total_nodes;
  }
  if (best.index == SIZE_MAX) {
    result.outcome = NotPlacedOutcome(result.report);
    result.reason = DescribeReport(result.report, r.exclusive);
    return result;
  }

  const NodeState& node = cluster.node(best.index);
  result.outcome = PlaceOutcome::kPlaced;
  Placement& p = result.placement;
  p.node_index = best.index;
  p.node = node.name;
  p.gpus = PickGpus(node, r, &p.topology_rule, workload);
  for (int g : p.gpus) {
    p.gpu_mem_mib.push_back(r.exclusive ? node.gpus[static_cast<size_t>(g)].total_mib
                                        : r.gpu_mem_mib);
  }
  p.resources = r.resources;
  p.exclusive = r.exclusive;

  result.report.chosen_node = node.name;
  result.report.topology_rule = p.topology_rule;
  ExplainChoice(node, best, r, &result.report);
  return result;
}

std::vector<int> Placer::OrderGpus(const NodeState& node, const PlacementRequest& r,
                                   std::span<const WeightedShape> workload,
                                   NodeFragmentation* frag, double* first_growth) const {
  struct Key {
    double growth;     // of the node's expected fragmentation (min_fragmentation only)
    double occupancy;  // (used + req) / total
    MiB leftover;      // free - req
    int index;
  };
  const GpuOrder order_by = options_.gpu_order;
  const bool by_fragmentation = order_by == GpuOrder::kMinFragmentation && !workload.empty();
  if (by_fragmentation) frag->Reset(node, options_.filter);
  std::vector<Key> fits;
  fits.reserve(node.gpus.size());
  // GPUs in the same state give the same growth (often all the free GPUs of a node): each
  // state is measured once.
  std::vector<std::pair<const GpuState*, double>> measured;
  for (const GpuState& g : node.gpus) {
    if (!GpuFits(g, r, options_.filter)) continue;
    const MiB req = r.exclusive ? g.total_mib : r.gpu_mem_mib;
    const MiB free = EffectiveFree(g, options_.filter);
    double growth = 0;
    if (by_fragmentation) {
      const auto same = std::find_if(measured.begin(), measured.end(), [&](const auto& m) {
        return SameState(*m.first, g, options_.filter);
      });
      if (same != measured.end()) {
        growth = same->second;
      } else {
        const int one[] = {g.index};
        growth = frag->Growth(r, one);
        measured.emplace_back(&g, growth);
      }
    }
    fits.push_back({growth,
                    static_cast<double>(g.allocated_mib + req) / static_cast<double>(g.total_mib),
                    free - req, g.index});
  }
  std::sort(fits.begin(), fits.end(), [order_by](const Key& a, const Key& b) {
    if (order_by == GpuOrder::kSpread) {
      if (a.occupancy != b.occupancy) return a.occupancy < b.occupancy;
      if (a.leftover != b.leftover) return a.leftover < b.leftover;
    } else {
      if (a.growth != b.growth) return a.growth < b.growth;  // 0 unless min_fragmentation
      if (a.leftover != b.leftover) return a.leftover < b.leftover;
      if (a.occupancy != b.occupancy) return a.occupancy > b.occupancy;
    }
    return a.index < b.index;
  });
  if (first_growth != nullptr && !fits.empty()) *first_growth = fits.front().growth;
  std::vector<int> order;
  order.reserve(fits.size());
  for (const Key& k : fits) order.push_back(k.index);
  return order;
}

std::vector<int> Placer::PickGpus(const NodeState& node, const PlacementRequest& r,
                                  std::string* rule, const WorkloadDistribution* workload) const {
  const std::span<const WeightedShape> shapes =
      workload != nullptr ? std::span<const WeightedShape>(workload->typical())
                          : std::span<const WeightedShape>();
  NodeFragmentation frag(shapes, options_.fragmentation);
  return PickByTopology(node, OrderGpus(node, r, shapes, &frag), r.gpus, rule);
}

}  // namespace gpusched::core
