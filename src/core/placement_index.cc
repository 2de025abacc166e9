// Placer::IndexedBest (issue 43): a weighted-score decision through the node index.

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "core/placement.h"

namespace gpusched::core {
namespace {

// Scores are in [0, 100]; the bound and the score are computed along different paths, so a
// node is skipped only when its bound is below the best by more than rounding can explain.
constexpr double kBoundMargin = 1e-7;

// UB(used) = c0 - c1 x used: the highest weighted score a node of a bucket that passes the
// filters can have for the request, given its mean used fraction and the bucket's spread
// range [s_lo, s_hi] and direction sector (NodeIndex::Group).
//   For such a node the request fits, so its used fractions after placement are f = a + r:
//   the node's before (mean `used`, standard deviation s, direction in the sector) plus the
//   request's r (a whole-GPU request takes between its count of the smallest and of the
//   largest GPU).
//   LeastAllocated = 100 (1 - mean f) = 100 (1 - used - mean r).
//   BalancedAllocation = 100 (1 - sd(a + r)). Centring is linear, so
//     sd(a + r)^2 = s^2 + sd(r)^2 + 2 s sd(r) cos(angle between a's and r's directions),
//   and the cosine is at least its least value over the sector; with s in [s_lo, s_hi] that
//   bounds sd(a + r) from below. Where the direction is unknown (a node without all three
//   kinds, or a request whose share varies with the GPU sizes) the cosine is taken as -1: the
//   triangle inequality, sd(a + r) >= |s - sd(r)|.
//   ServerLoad and GpuBestFit are at most 100.
struct Bound {
  double c0 = 0, c1 = 0;
  double At(double used) const { return c0 - c1 * used; }
};

// The request's fractions of one of the group's nodes: their mean (at least), the range of
// their standard deviation and, when it is one value with all three kinds, their direction;
// kinds = 0 when the node has no CPU, RAM or GPU memory.
struct RequestShare {
  double mean = 0, spread_lo = 0, spread_hi = 0, angle = 0;
  bool directed = false;
  int kinds = 0;
  // When directed: by sector, the least cosine of the angle between a direction in it and
  // the request's (LeastCosine), computed once for every bucket of the group.
  std::array<double, NodeIndex::kSectors> least_cos{};
};

double LeastCosine(int sector, double angle);

RequestShare ShareOf(const NodeIndex::Group& g, const PlacementRequest& r) {
  double lo[3], hi[3];
  int k = 0;
  auto add = [&](double low, double high) {
    lo[k] = low;
    hi[k++] = high;
  };
  const auto cpu = static_cast<double>(r.resources.cpu_milli);
  const auto mem = static_cast<double>(r.resources.mem_mib);
  if (g.inv_cpu > 0) add(cpu * g.inv_cpu, cpu * g.inv_cpu);
  if (g.inv_mem > 0) add(mem * g.inv_mem, mem * g.inv_mem);
  if (g.inv_gpu_mem > 0) {
    const MiB low = r.exclusive ? g.key.min_gpu : r.gpu_mem_mib;
    const MiB high = r.exclusive ? g.key.max_gpu : r.gpu_mem_mib;
    add(static_cast<double>(r.gpus * low) * g.inv_gpu_mem,
        std::min(1.0, static_cast<double>(r.gpus * high) * g.inv_gpu_mem));
  }
  RequestShare share;
  share.kinds = k;
  if (k == 0) return share;
  for (int i = 0; i < k; ++i) share.mean += lo[i];
  share.mean /= k;
  // sd is convex in the one component that varies: its largest value is at an end; its
  // smallest may lie between them, so a range that varies says 0.
  const bool fixed = lo[k - 1] == hi[k - 1];
  share.spread_hi = std::max(SpreadOfFractions(lo, k), SpreadOfFractions(hi, k));
  share.spread_lo = fixed ? SpreadOfFractions(lo, k) : 0.0;
  share.directed = fixed && k == 3;
  if (share.directed) {
    share.angle = NodeIndex::Direction(lo);
    for (int d = 0; d < NodeIndex::kSectors; ++d) share.least_cos[d] = LeastCosine(d, share.angle);
  }
  return share;
}

// The least cosine of the angle between a direction in `sector` and `angle`.
double LeastCosine(int sector, double angle) {
  double from = NodeIndex::SectorStart(sector) - angle;
  while (from < -M_PI) from += 2 * M_PI;
  while (from >= M_PI) from -= 2 * M_PI;
  const double to = from + 2 * M_PI / NodeIndex::kSectors;
  if (to >= M_PI) return -1.0;  // the sector holds the opposite direction
  return std::min(std::cos(from), std::cos(to));
}

// A lower bound of sd(a + r) over the nodes of a bucket (see Bound).
double LeastSpreadAfter(const RequestShare& share, bool node_directed, uint32_t bucket) {
  const auto [s_lo, s_hi] = NodeIndex::SpreadRange(NodeIndex::Group::Spread(bucket));
  if (!share.directed || !node_directed) {
    return std::max({0.0, s_lo - share.spread_hi, share.spread_lo - s_hi});
  }
  const double sr = share.spread_lo;
  const double c = share.least_cos[NodeIndex::Group::Sector(bucket)];
  const double s = std::clamp(-sr * c, s_lo, s_hi);  // the vertex of the quadratic in s
  return std::sqrt(std::max(0.0, s * s + sr * sr + 2 * s * sr * c));
}

// What the bound reads of the weights, once per decision.
struct BoundWeights {
  explicit BoundWeights(const ScoreWeights& w)
      : total(std::accumulate(w.weight.begin(), w.weight.end(), 0.0)),
        least(w.weight[kScorerLeastAllocated]),
        balanced(w.weight[kScorerBalancedAllocation]),
        others((total - least - balanced) * 100.0) {}
  double total, least, balanced, others;
};

Bound BoundFor(const NodeIndex::Group& g, const RequestShare& share, uint32_t bucket,
               const BoundWeights& w) {
  if (w.total <= 0) return {};  // every score is 0
  if (share.kinds == 0) return {(w.balanced * 100.0 + w.others) / w.total, 0};  // no LeastAllocated
  const bool node_directed = g.inv_cpu > 0 && g.inv_mem > 0 && g.inv_gpu_mem > 0;
  const double least = w.least * 100.0 * (1.0 - share.mean);
  const double balanced =
      w.balanced * 100.0 * (1.0 - LeastSpreadAfter(share, node_directed, bucket));
  return {(least + balanced + w.others) / w.total, w.least * 100.0 / w.total};
}

// A bucket the request may fit in, with its bound line and its bound at its least used class
// (the highest in the bucket).
struct Walk {
  double bound;
  Bound line;
  uint32_t group, bucket;
  const NodeIndex::Bucket* classes;
};

// The heap's order (a max-heap on the bound); equal bounds by group and bucket, so the walk is
// the same every run.
bool LowerBound(const Walk& a, const Walk& b) {
  if (a.bound != b.bound) return a.bound < b.bound;
  return a.group != b.group ? a.group > b.group : a.bucket > b.bucket;
}

// Whether a node of the bucket may have the GPUs the request asks for (NodeIndex::Group).
bool MayFit(const NodeIndex::Group& g, uint32_t bucket, const PlacementRequest& r) {
  if (r.gpus == 0) return true;
  if (r.exclusive) return NodeIndex::Group::WholeFree(bucket) >= r.gpus;
  return NodeIndex::Group::FreeLevel(bucket) >= g.Level(r.gpu_mem_mib);
}

// Every bucket of the group the request may fit in.
void AddWalks(const NodeIndex::Group& g, uint32_t group, const PlacementRequest& r,
              const BoundWeights& w, std::vector<Walk>* walks) {
  const RequestShare share = ShareOf(g, r);
  for (const auto& [b, classes] : g.buckets) {
    if (!MayFit(g, b, r)) continue;
    const Bound line = BoundFor(g, share, b, w);
    walks->push_back({line.At(classes.front().used), line, group, b, &classes});
  }
}

}  // namespace

bool Placer::UsesIndex(const ClusterState& cluster) const {
  return MayUseIndex() && cluster.size() >= options_.index_min_nodes;
}

Placer::Candidate Placer::IndexedBest(const ClusterState& cluster, const PlacementRequest& r,
                                      PlacementReport* report) const {
  const NodeIndex& index = cluster.index();
  const auto& groups = index.groups();
  // Reused: a decision would otherwise allocate it (Place is const and may run on several
  // threads at once, so one per thread).
  thread_local std::vector<Walk> walks;
  walks.clear();
  const BoundWeights bound_weights(options_.weights);
  for (uint32_t g = 0; g < groups.size(); ++g) AddWalks(groups[g], g, r, bound_weights, &walks);
  // A heap: most decisions walk a few of the buckets, highest bound first.
  std::make_heap(walks.begin(), walks.end(), LowerBound);
  Candidate best;
  // Every node left in a bucket scores at most the bucket's bound: below the best, none can
  // win (nor tie).
  auto hopeless = [&](double bound) {
    return best.index != SIZE_MAX && bound < -best.primary - kBoundMargin;
  };
  // A class that may win: its first member by name (the one a tie would choose) through the
  // filters, and ranked as the scan ranks it.
  auto visit = [&](uint32_t class_id) {
    const NodeIndex::Class& c = index.cls(class_id);
    const size_t i = c.first;
    const auto members = static_cast<int64_t>(c.members.size());
    report->examined_nodes += members;
    const int rejected_by =
        FirstRejectingFilterFast(cluster.summary(i), cluster.node(i), r, options_.filter);
    if (rejected_by != kNumFilters) {
      report->rejected[rejected_by] += members;
      return;
    }
    report->feasible_nodes += members;
    const Candidate candidate = Rank(cluster.summary(i), i, r);
    if (Better(cluster, candidate, best)) best = candidate;
  };
  // The buckets from the highest bound down; each from its least used class while its bound
  // may still reach the best. A class whose own score (from its entry) is below the best by
  // more than rounding cannot win: it is not looked at further.
  const bool default_plugins = OnlyDefaultPluginsWeighted(options_.weights);
  const double wl = options_.weights.weight[kScorerLeastAllocated];
  const double wb = options_.weights.weight[kScorerBalancedAllocation];
  auto score = [&](const ScoreInputs& in) {
    return default_plugins && HasAllKinds(in) ? DefaultPluginsScore(in, r, wl, wb)
                                              : WeightedScoreFast(options_.weights, in, r);
  };
  for (auto end = walks.end(); end != walks.begin(); --end) {
    std::pop_heap(walks.begin(), end, LowerBound);
    const Walk& walk = *(end - 1);
    if (hopeless(walk.bound)) break;  // and every bucket after it
    for (const NodeIndex::Entry& e : *walk.classes) {
      if (hopeless(walk.line.At(e.used))) break;
      if (best.index != SIZE_MAX && -score(e.in) > best.primary + kBoundMargin) continue;
      visit(e.id);
    }
  }
  return best;
}

}  // namespace gpusched::core
