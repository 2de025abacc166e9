#pragma once
// KubeCache: the extender's thread-safe copy of the cluster's nodes and GPU-holding pods, as
// a GpuCluster kept current by the informers (kube_sync.h) and by the extender's own binds.
//
// Assumed pods: a bind records its pod here (Assume) before it patches the annotations and
// posts the Binding, so the very next filter or bind already sees the GPUs as taken
// (CN109992422A: a reservation is visible to the next request before any heartbeat). The
// assumption stands until the watch shows the pod bound (the watch's version replaces it),
// the pod is deleted, the bind fails (Forget), or `assume_ttl_ms` passes without the watch
// confirming it.
//
// Only pods that hold GPUs are kept: bound, not finished, asking for nvidia.com/gpu or GPU
// memory.
//
// Thread-safety: all methods are thread-safe. Read() holds a shared lock while `fn` runs;
// writers hold it exclusively. LockNode() serialises binds to one node.

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "extender/gpu_cluster.h"
#include "extender/kube_api.h"

namespace gpusched::extender {

class KubeCache {
 public:
  KubeCache(ModelOptions options, Clock& clock, DurationMs assume_ttl_ms = 120'000)
      : options_(options), clock_(clock), assume_ttl_ms_(assume_ttl_ms), cluster_(options) {}

  // A fresh list: replaces every node (or pod) and marks that half of the cache synced.
  void ReplaceNodes(const std::vector<KubeNode>& nodes);
  void ReplacePods(const std::vector<KubePod>& pods);
  void ApplyNode(WatchEventType type, const KubeNode& node);
  void ApplyPod(WatchEventType type, const KubePod& pod);

  // Both nodes and pods have been listed at least once.
  bool synced() const;

  // REQUIRES: claim.node is set. See the class comment.
  void Assume(PodClaim claim);
  void Forget(const std::string& uid);

  // Runs fn(const GpuCluster&) under the shared lock and returns its result.
  template <typename Fn>
  auto Read(Fn&& fn) const {
    std::shared_lock lock(mu_);
    return fn(cluster_);
  }

  // The lock a bind to `node` holds from choosing GPUs to posting the Binding.
  std::unique_lock<std::mutex> LockNode(const std::string& node);

  struct Stats {
    int64_t node_events = 0, pod_events = 0, node_lists = 0, pod_lists = 0;
    int64_t assumed = 0;  // assumptions standing now
  };
  Stats stats() const;

 private:
  struct Assumption {
    PodClaim claim;
    TimeMs expires_ms = 0;
  };
  // REQUIRES: mu_ held exclusively.
  void ExpireAssumptions();
  void Rebuild();

  const ModelOptions options_;
  Clock& clock_;
  const DurationMs assume_ttl_ms_;

  mutable std::shared_mutex mu_;
  GpuCluster cluster_;
  std::map<std::string, KubeNode> nodes_;                 // by name
  std::unordered_map<std::string, PodClaim> bound_;       // by UID, as the API shows them
  std::unordered_map<std::string, Assumption> assumed_;   // by UID
  bool nodes_synced_ = false, pods_synced_ = false;
  Stats stats_;

  std::mutex node_locks_mu_;
  std::unordered_map<std::string, std::unique_ptr<std::mutex>> node_locks_;
};

}  // namespace gpusched::extender
