#pragma once
// The filter -> score -> pick pipeline (DESIGN.md steps 3-4) as a pure function over a
// snapshot of the cluster: Placer::Place(cluster, request) returns where the request would go,
// or why it cannot go anywhere now, with per-filter rejection counts and the score breakdown
// of the chosen node. Committing (reserving) is the Scheduler's job.
//
// CN115981827A claim 1 and section 4: above `parallel_threshold` reachable nodes (|M|, the
// nodes that passed the probe daemon) the filter and score run in W chunks of the node list
// on the Executor; the result is identical to
// the sequential one because each chunk keeps its best node and the merge uses the same total
// order (score, then name).
// CN109992422A claims 3-4: inside the chosen node, GPUs are picked by the preset principles.
//
// Thread-safety: Place() is const and reentrant; the Executor must not be shared by two
// concurrent Place() calls.

#include <array>
#include <string>
#include <vector>

#include "base/executor.h"
#include "core/cluster_state.h"
#include "core/filters.h"
#include "core/placement_report.h"
#include "core/scorers.h"
#include "core/task.h"

namespace gpusched::core {

// How the feasible nodes are ranked.
enum class NodeOrder {
  kWeightedScore,  // default: CN115981827A k8s_select, weighted score plugins
  kLoadBalance,    // CN109992422A claim 4 literally: fewest tasks, then lowest mean GPU
                   // occupancy, then name
};

// How GPUs are picked inside the chosen node.
enum class GpuOrder {
  kSpread,   // default, CN109992422A claims 3-4: lowest (used + req) / total, then best fit
  kBestFit,  // smallest free - req first (packs shared GPUs, keeps whole GPUs free)
};

struct PlacementOptions {
  NodeOrder node_order = NodeOrder::kWeightedScore;
  GpuOrder gpu_order = GpuOrder::kSpread;
  ScoreWeights weights;
  FilterOptions filter;
  size_t parallel_threshold = 100;  // N_par
  size_t parallel_chunks = 16;      // W
};

// What Place() answers, as Ray's scheduling policies do: a value, never an error.
//   kPlaced      `placement` says where.
//   kRetryLater  no node fits now, but one could after a release, a heartbeat or a node's
//                return (at least one node was rejected for its state or its free capacity);
//                `reason` says why.
//   kInfeasible  every node rejects the request for what it is (taints, selector, GPU model,
//                GPU count), so no release can help until the cluster changes; `reason` says
//                why. An empty cluster is kRetryLater: nodes may still join.
// `report` carries the filter counts and, when placed, the score breakdown.
enum class PlaceOutcome { kPlaced, kRetryLater, kInfeasible };

struct PlacementResult {
  PlaceOutcome outcome = PlaceOutcome::kRetryLater;
  Placement placement;  // kPlaced only
  std::string reason;   // kRetryLater and kInfeasible: DescribeReport(report, exclusive)
  PlacementReport report;

  bool placed() const { return outcome == PlaceOutcome::kPlaced; }
};

const char* PlaceOutcomeName(PlaceOutcome outcome);

class Placer {
 public:
  Placer(PlacementOptions options, Executor* executor)
      : options_(std::move(options)), executor_(executor) {}

  PlacementResult Place(const ClusterState& cluster, const PlacementRequest& request) const;

  // GPUs of `node` for the request, by the GPU order, then the topology rules
  // (topology_pick.h), which say in `rule` when they changed the choice. REQUIRES: the node
  // passes the filters.
  std::vector<int> PickGpus(const NodeState& node, const PlacementRequest& request,
                            std::string* rule = nullptr) const;

  const PlacementOptions& options() const { return options_; }

 private:
  struct Candidate {
    size_t index = SIZE_MAX;
    double primary = 0, secondary = 0;  // lower is better
  };
  struct ChunkResult {
    FilterCounts rejected{};
    int64_t feasible = 0;
    Candidate best;
  };
  void ScanChunk(const ClusterState& cluster, const PlacementRequest& r, size_t begin,
                 size_t end, ChunkResult* out) const;
  Candidate Rank(const NodeSummary& n, size_t index, const PlacementRequest& r) const;
  bool Better(const ClusterState& cluster, const Candidate& a, const Candidate& b) const;

  PlacementOptions options_;
  Executor* executor_;  // may be null: always sequential
};

}  // namespace gpusched::core
