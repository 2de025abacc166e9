#pragma once
// Quota reclaim (issue 37) as a pure choice over values: which running tasks of teams above
// their guarantee to stop so that a task its team's guarantee covers can start.
//
//   where      only on a node the task passes every placement filter on once the stopped
//              tasks are gone (node rules, taints, shape, GPU model: FirstRejectingFilter,
//              the filters placement runs). A task stopped elsewhere frees nothing it can use.
//   whom       on that node, tasks of other teams above their guarantee: first from the team
//              furthest above it by team total (not by task age), the larger task first, ties
//              by the larger id, each only while its team is still above its guarantee
//              (Kueue's reclaimWithinCohort); then every one the task fits without is kept.
//   which node the smallest set: fewest tasks, then fewest GPUs, then the lowest node index.
//
// Thread-safety: none needed (pure functions).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "core/filters.h"
#include "core/quota.h"

namespace gpusched::core {

// A running (or just assigned) task another team's reclaim may stop.
struct ReclaimCandidate {
  TaskId id;
  std::string team;
  Placement placement;  // what it holds in the view (one node: gangs are never candidates)
};

struct ReclaimChoice {
  size_t node_index = 0;
  std::vector<size_t> victims;  // indices into the candidates, in the order they are stopped
  int64_t gpus = 0;             // the victims' GPUs
  std::map<std::string, int64_t> gpus_by_team;
};

// The smallest set of `candidates` whose stop lets a task of `shape` pass the filters on one
// node of `view`, or nullopt when none does. `usage`: each team's holdings, candidates
// included. The GPU memory reported free is not read: the victims still hold it until they
// exit.
std::optional<ReclaimChoice> ChooseReclaim(const ClusterState& view, const PlacementRequest& shape,
                                           const QuotaPolicy& quotas,
                                           const std::map<std::string, TeamUsage>& usage,
                                           const std::vector<ReclaimCandidate>& candidates);

// "team vision at 2/4 guaranteed GPUs" (`used`: before the task that asks).
std::string DescribeQuotaState(const std::string& team, const TeamUsage& used,
                               const TeamQuota& quota);
// "reclaiming 2 from nlp, ready in 30s" (the longest grace of the stopped tasks).
std::string DescribeReclaim(const ReclaimChoice& choice, DurationMs ready_in_ms);

}  // namespace gpusched::core
