#include "core/reclaim.h"

#include <algorithm>
#include <tuple>

#include "base/units.h"

namespace gpusched::core {
namespace {

// One node's candidates, tried on `trial` (a copy of the view), which is left as it was.
class NodeReclaim {
 public:
  NodeReclaim(ClusterState& trial, size_t node, const PlacementRequest& shape,
              const QuotaPolicy& quotas, std::map<std::string, TeamUsage> usage,
              const std::vector<ReclaimCandidate>& all)
      : trial_(trial), node_(node), shape_(shape), quotas_(quotas), usage_(std::move(usage)),
        all_(all) {}

  std::optional<ReclaimChoice> Choose(std::vector<size_t> left) {
    if (!FitsWithout(left)) return std::nullopt;  // the task cannot run here at all
    std::vector<size_t> taken;
    while (!Fits()) {
      const std::optional<size_t> next = Next(left);
      if (!next) break;
      Stop(*next, taken);
      std::erase(left, *next);
    }
    const bool fits = Fits();
    if (fits) KeepWhatIsNotNeeded(taken);
    for (size_t i : taken) trial_.Reserve(all_[i].placement);
    if (!fits) return std::nullopt;
    ReclaimChoice c;
    c.node_index = node_;
    c.victims = std::move(taken);
    for (size_t i : c.victims) {
      const int64_t gpus = static_cast<int64_t>(all_[i].placement.gpus.size());
      c.gpus += gpus;
      c.gpus_by_team[all_[i].team] += gpus;
    }
    return c;
  }

 private:
  bool Fits() const {
    return FirstRejectingFilter(trial_.node(node_), shape_, FilterOptions{}) == kNumFilters;
  }
  bool FitsWithout(const std::vector<size_t>& ids) {
    for (size_t i : ids) trial_.Release(all_[i].placement);
    const bool fits = Fits();
    for (size_t i : ids) trial_.Reserve(all_[i].placement);
    return fits;
  }
  // The next victim: of the team furthest above its guarantee (team total), the larger
  // task first, ties by the larger id (the later submission: the least work lost); only a
  // team still above its guarantee gives one.
  std::optional<size_t> Next(const std::vector<size_t>& left) const {
    std::optional<size_t> best;
    std::tuple<int64_t, int64_t, int64_t> best_key;
    for (size_t i : left) {
      const ReclaimCandidate& c = all_[i];
      const TeamUsage& used = usage_.at(c.team);
      if (!quotas_.IsBorrowing(c.team, used)) continue;
      const std::tuple<int64_t, int64_t, int64_t> key{
          used.gpus - quotas_.Of(c.team).guaranteed_gpus,
          static_cast<int64_t>(c.placement.gpus.size()), static_cast<int64_t>(c.id.value())};
      if (!best || key > best_key) {
        best = i;
        best_key = key;
      }
    }
    return best;
  }
  void Stop(size_t i, std::vector<size_t>& taken) {
    const Placement& p = all_[i].placement;
    trial_.Release(p);
    TeamUsage& u = usage_[all_[i].team];
    u.gpus -= static_cast<int64_t>(p.gpus.size());
    for (MiB m : p.gpu_mem_mib) u.gpu_mem_mib -= m;
    taken.push_back(i);
  }
  // Gives back every victim the task fits without, the last taken first.
  void KeepWhatIsNotNeeded(std::vector<size_t>& taken) {
    for (size_t k = taken.size(); k-- > 0;) {
      trial_.Reserve(all_[taken[k]].placement);
      if (Fits()) {
        taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        trial_.Release(all_[taken[k]].placement);
      }
    }
  }

  ClusterState& trial_;
  const size_t node_;
  const PlacementRequest& shape_;
  const QuotaPolicy& quotas_;
  std::map<std::string, TeamUsage> usage_;
  const std::vector<ReclaimCandidate>& all_;
};

bool Smaller(const ReclaimChoice& a, const ReclaimChoice& b) {
  return std::tuple(a.victims.size(), a.gpus, a.node_index) <
         std::tuple(b.victims.size(), b.gpus, b.node_index);
}

}  // namespace

std::optional<ReclaimChoice> ChooseReclaim(const ClusterState& view, const PlacementRequest& shape,
                                           const QuotaPolicy& quotas,
                                           const std::map<std::string, TeamUsage>& usage,
                                           const std::vector<ReclaimCandidate>& candidates) {
  std::map<size_t, std::vector<size_t>> by_node;  // node index -> candidates, ordered
  std::map<std::string, TeamUsage> teams;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ReclaimCandidate& c = candidates[i];
    auto it = usage.find(c.team);
    const TeamUsage used = it == usage.end() ? TeamUsage{} : it->second;
    if (!quotas.IsBorrowing(c.team, used)) continue;
    teams[c.team] = used;
    by_node[c.placement.node_index].push_back(i);
  }
  if (by_node.empty()) return std::nullopt;
  ClusterState trial = view;
  std::optional<ReclaimChoice> best;
  for (auto& [node, ids] : by_node) {
    NodeReclaim n(trial, node, shape, quotas, teams, candidates);
    std::optional<ReclaimChoice> c = n.Choose(std::move(ids));
    if (c && (!best || Smaller(*c, *best))) best = std::move(c);
  }
  return best;
}

std::string DescribeQuotaState(const std::string& team, const TeamUsage& used,
                               const TeamQuota& quota) {
  return "team " + team + " at " + std::to_string(used.gpus) + "/" +
         std::to_string(quota.guaranteed_gpus) + " guaranteed GPUs";
}

std::string DescribeReclaim(const ReclaimChoice& choice, DurationMs ready_in_ms) {
  std::string from;
  for (const auto& [team, gpus] : choice.gpus_by_team) {
    from += (from.empty() ? "" : ", ") + std::to_string(gpus) + " from " + team;
  }
  return "reclaiming " + from + ", ready in " + FormatDurationMs(ready_in_ms);
}

}  // namespace gpusched::core
