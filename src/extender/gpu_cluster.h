#pragma once
// GpuCluster: the extender's view of the cluster's GPUs as a core::ClusterState, built from
// Kubernetes Node objects and the GPU holdings of bound pods (CN109992422A's cluster state
// table, fed by the API server instead of agent heartbeats).
//
// Only GPUs are modelled: CPU and RAM stay kube-scheduler's (its in-tree filters ran before
// the extender is asked), so node capacities are 0 and the core filters and scorers read GPU
// memory alone.
//
// Where a bound pod sits: the GPU indices of its bind annotations when they are valid, else
// (pods bound by someone else) the lowest-index whole-free GPUs for whole-GPU pods and the
// GPU with the most free memory for shared ones. A node's pods are re-placed from scratch, in
// a fixed order (annotated pods first, then by UID), whenever the node or one of its pods
// changes, so the result does not depend on the order events arrived in. When Kubernetes'
// state claims more than a GPU holds, the claim is kept at what fits and counted in
// overcommitted_claims(): the accounting invariant (0 <= allocated <= total) always holds,
// and the next pod never gets memory that is already claimed.
//
// Thread-safety: none; const methods may run concurrently when no thread mutates.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cluster_state.h"
#include "extender/kube_objects.h"

namespace gpusched::extender {

struct ModelOptions {
  // MiB of one gpushare unit: 1024 (gpushare's device plugin default, --memory-unit=GiB) or 1.
  MiB gpushare_unit_mib = 1024;
};

// One bound pod's hold on its node's GPUs.
struct PodClaim {
  std::string uid;
  std::string key;   // namespace/name
  std::string node;
  int32_t priority = 0;
  int64_t whole_gpus = 0;
  MiB shared_mib = 0;  // on one GPU
  std::vector<int> annotated_gpus;
  bool assumed = false;  // bound by this extender, not yet seen bound by the watch
};

// REQUIRES: pod.Active() and pod.ask.any().
PodClaim ClaimOf(const KubePod& pod, const ModelOptions& options);

class GpuCluster {
 public:
  explicit GpuCluster(ModelOptions options = {}) : options_(options) {}

  void UpsertNode(const KubeNode& node);
  void RemoveNode(const std::string& name);
  // REQUIRES: claim.node is set. Replaces an earlier claim of the same UID (on any node).
  void UpsertPod(PodClaim claim);
  void RemovePod(const std::string& uid);

  const core::ClusterState& state() const { return state_; }
  // Index in state() of a known (not removed) node.
  std::optional<size_t> Index(const std::string& name) const;
  const KubeNode* Node(const std::string& name) const;
  // False for a node with GPUs that advertises no GPU memory (modelled as 1 MiB GPUs).
  bool MemoryKnown(const std::string& name) const;
  const PodClaim* Pod(const std::string& uid) const;
  // The placement applied for a bound pod; nullptr when its node is unknown.
  const core::Placement* Applied(const std::string& uid) const;
  // UIDs of the pods bound to `node` (known node or not), ascending.
  std::vector<std::string> PodsOn(const std::string& node) const;

  size_t node_count() const { return nodes_.size(); }
  size_t pod_count() const { return pods_.size(); }
  int64_t overcommitted_claims() const { return overcommitted_; }
  const ModelOptions& options() const { return options_; }

 private:
  struct NodeEntry {
    KubeNode node;
    size_t index = 0;
    bool memory_known = true;
    int64_t overcommitted = 0;  // claims of this node kept at less than they hold
    std::map<std::string, core::Placement> applied;  // by pod UID
  };
  void Reapply(NodeEntry& entry);
  core::Placement PlaceClaim(const core::NodeState& n, const PodClaim& claim,
                             bool& overcommitted);

  ModelOptions options_;
  core::ClusterState state_;
  std::unordered_map<std::string, NodeEntry> nodes_;
  std::unordered_map<std::string, PodClaim> pods_;
  std::unordered_map<std::string, std::set<std::string>> pods_by_node_;
  int64_t overcommitted_ = 0;
};

}  // namespace gpusched::extender
