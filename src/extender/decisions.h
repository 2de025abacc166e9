#pragma once
// The extender's decisions as pure functions over a GpuCluster snapshot: which candidate
// nodes can take a pod and why the others cannot (filter), how good each is (prioritize),
// which GPUs it gets (bind) and which victims really free enough GPU memory (preempt).
//
// They are the gpusched server's decisions: core's filters (FirstRejectingFilter), its
// weighted score plugins (WeightedScore) and its GPU choice inside a node (Placer::PickGpus,
// CN109992422A claims 3-4), with the server's default PlacementOptions. The extender only
// sees the candidates kube-scheduler hands it, so it judges nodes one by one instead of
// running Placer::Place over the whole cluster.
//
// Reasons are meant for pod events, where kube-scheduler counts identical reasons ("0/40
// nodes are available: 37 gpusched: insufficient GPU memory: no GPU has 8GiB free, ...").
// They depend on the pod's need and the node's kind of failure, not on per-node numbers, so
// they aggregate into a readable line.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/placement.h"
#include "extender/gpu_cluster.h"
#include "extender/kube_objects.h"

namespace gpusched::extender {

struct DecisionOptions {
  // The gpusched server's defaults: weighted LeastAllocated + BalancedAllocation, GPUs by
  // the CN109992422A principles (lowest occupancy after placement, then best fit).
  core::PlacementOptions placement;
};

// What a pod asks of the GPUs, owning what core::PlacementRequest points to.
struct PodRequest {
  bool wants_gpus = false;
  int64_t gpus = 0;       // whole GPUs, or 1 for a shared GPU
  MiB shared_mib = 0;     // on one shared GPU (0 for whole GPUs)
  bool exclusive = false;
  std::string model;      // required GPU model, empty = any
  std::map<std::string, std::string> node_selector;
  std::vector<core::Toleration> tolerations;
  std::string invalid;    // non-empty: the pod's GPU requests are unusable, and why

  // REQUIRES: this outlives the result (it points into node_selector and tolerations).
  core::PlacementRequest Core(const core::ClusterState& state) const;
  // "4 whole GPUs", "8GiB on one GPU".
  std::string Describe() const;
};

PodRequest MakePodRequest(const KubePod& pod, const ModelOptions& options);

struct NodeVerdict {
  std::string node;
  bool fits = false;
  bool resolvable = false;  // !fits: evicting pods could make room (FailedNodes)
  std::string reason;       // !fits: one line for the pod's events
};

// One verdict per name, in the given order.
std::vector<NodeVerdict> FilterNodes(const GpuCluster& cluster, const PodRequest& request,
                                     const std::vector<std::string>& names,
                                     const DecisionOptions& options);

struct HostScore {
  std::string host;
  int64_t score = 0;  // 0..10 (kube-scheduler's MaxExtenderPriority)
};

// One score per name, in the given order: core's weighted score (0..100) / 10, rounded;
// 0 for nodes that do not fit and for pods that ask for no GPU.
std::vector<HostScore> ScoreNodes(const GpuCluster& cluster, const PodRequest& request,
                                  const std::vector<std::string>& names,
                                  const DecisionOptions& options);

// The GPUs the pod gets on `node` (bind). FailedPrecondition with the filter's reason when
// it does not fit there (any more); NotFound for a node the cluster does not know.
StatusOr<core::Placement> ChooseGpus(const GpuCluster& cluster, const PodRequest& request,
                                     const std::string& node, const DecisionOptions& options);

struct VictimSet {
  std::string node;
  std::vector<std::string> victim_uids;  // most important first
  int64_t pdb_violations = 0;
};

// kube-scheduler proposes, per node, victims that make room by its own (in-tree) reckoning.
// For each node this keeps the proposal when the pod then also fits on the node's GPUs,
// minus the GPU-holding victims whose eviction is not needed for that (tried most important
// first, so the most important are spared); victims holding no GPU were chosen for other
// resources and stay. Nodes where evicting every proposed victim still leaves no GPU room,
// and unknown nodes, are dropped. Of the rest, only the nodes with the fewest PDB
// violations are returned: kube-scheduler picks its node by that count first, so the others
// could only cost evictions. A pod asking for no GPU gets the proposals unchanged.
std::vector<VictimSet> ChooseVictims(const GpuCluster& cluster, const PodRequest& request,
                                     const std::vector<VictimSet>& proposals,
                                     const DecisionOptions& options);

}  // namespace gpusched::extender
