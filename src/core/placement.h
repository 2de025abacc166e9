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
// The `min_fragmentation` orders (fragmentation.h) rank by the growth of the expected
// fragmentation against the workload seen so far, which the caller passes in.
//
// Thread-safety: Place() is const and reentrant; the Executor must not be shared by two
// concurrent Place() calls.

#include <array>
#include <span>
#include <string>
#include <vector>

#include "base/executor.h"
#include "core/cluster_state.h"
#include "core/filters.h"
#include "core/fragmentation.h"
#include "core/placement_report.h"
#include "core/scorers.h"
#include "core/task.h"

namespace gpusched::core {

// How the feasible nodes are ranked.
enum class NodeOrder {
  kWeightedScore,  // default: CN115981827A k8s_select, weighted score plugins
  kLoadBalance,    // CN109992422A claim 4 literally: fewest tasks, then lowest mean GPU
                   // occupancy, then name
  kMinFragmentation,  // least growth of the node's expected fragmentation (fragmentation.h)
                      // when the task takes the GPUs the GPU order picks there; then the
                      // fullest GPU memory after placement (best fit), then name
};

// How GPUs are picked inside the chosen node.
enum class GpuOrder {
  kSpread,   // default, CN109992422A claims 3-4: lowest (used + req) / total, then best fit
  kBestFit,  // smallest free - req first (packs shared GPUs, keeps whole GPUs free)
  kMinFragmentation,  // least growth of the node's expected fragmentation when one share
                      // goes on the GPU (fragmentation.h), then best fit; without a
                      // workload it is best fit
};

struct PlacementOptions {
  NodeOrder node_order = NodeOrder::kWeightedScore;
  GpuOrder gpu_order = GpuOrder::kSpread;
  ScoreWeights weights;
  FilterOptions filter;
  // What the min_fragmentation orders measure (fragmentation.h).
  FragmentationMeasure fragmentation = FragmentationMeasure::kPacking;
  size_t parallel_threshold = 100;  // N_par
  size_t parallel_chunks = 16;      // W
  // Issue 43: on clusters of at least `index_min_nodes` nodes, weighted-score decisions walk
  // the node index (node_index.h) from the highest score bound down instead of scanning every
  // node; the same decisions. Below it, and with index = false, every decision scans (in
  // parallel chunks above N_par). `bench core` measures both: the index pays from about
  // 2,000 nodes of 8 GPUs (docs/performance.md).
  bool index = true;
  size_t index_min_nodes = 2000;
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

  // `workload`: the task shapes seen so far, read by the min_fragmentation orders only; null
  // = none (every fragmentation growth is 0 and the orders fall back to best fit).
  PlacementResult Place(const ClusterState& cluster, const PlacementRequest& request,
                        const WorkloadDistribution* workload = nullptr) const;

  // GPUs of `node` for the request, by the GPU order, then the topology rules
  // (topology_pick.h), which say in `rule` when they changed the choice. REQUIRES: the node
  // passes the filters.
  std::vector<int> PickGpus(const NodeState& node, const PlacementRequest& request,
                            std::string* rule = nullptr,
                            const WorkloadDistribution* workload = nullptr) const;

  const PlacementOptions& options() const { return options_; }
  // Whether any decision may read the node index (issue 43: on a cluster of at least
  // `index_min_nodes`); a table only this placer reads need not keep one otherwise.
  bool MayUseIndex() const {
    return options_.index && options_.node_order == NodeOrder::kWeightedScore;
  }

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
  void ScanChunk(const ClusterState& cluster, const PlacementRequest& r,
                 std::span<const WeightedShape> workload, size_t begin, size_t end,
                 ChunkResult* out) const;
  // Every node through the filters, in chunks on the executor above the threshold; the
  // filter counts into `report`. Returns the best candidate (index SIZE_MAX: none).
  Candidate Scan(const ClusterState& cluster, const PlacementRequest& r,
                 std::span<const WeightedShape> shapes, PlacementReport* report) const;
  // Issue 43: the weighted-score best through the node index: the node Scan would choose.
  // The report counts the nodes of the classes it ran the filters on (those whose score may
  // win); `examined_nodes` says how many that was. None fits: Place() scans for the full
  // counts.
  Candidate IndexedBest(const ClusterState& cluster, const PlacementRequest& r,
                        PlacementReport* report) const;
  bool UsesIndex(const ClusterState& cluster) const;
  // The chosen node's score and its breakdown under the node order.
  void ExplainChoice(const NodeState& node, const Candidate& best, const PlacementRequest& r,
                     PlacementReport* report) const;
  Candidate Rank(const NodeSummary& n, size_t index, const PlacementRequest& r) const;
  // kMinFragmentation: the growth for the GPUs PickGpus would take; `frag` is scratch.
  Candidate RankByFragmentation(const NodeState& n, const NodeSummary& s, size_t index,
                                const PlacementRequest& r, std::span<const WeightedShape> workload,
                                NodeFragmentation* frag) const;
  // The GPU order's preference list (the GPUs that fit, best first); `frag` is Reset for
  // the node when the order needs it, and `first_growth` (may be null) receives the first
  // GPU's growth (min_fragmentation; 0 otherwise).
  std::vector<int> OrderGpus(const NodeState& node, const PlacementRequest& r,
                             std::span<const WeightedShape> workload, NodeFragmentation* frag,
                             double* first_growth = nullptr) const;
  bool Better(const ClusterState& cluster, const Candidate& a, const Candidate& b) const;

  PlacementOptions options_;
  Executor* executor_;  // may be null: always sequential
};

}  // namespace gpusched::core
