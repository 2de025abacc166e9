#include "extender/kube_cache.h"

namespace gpusched::extender {
namespace {

bool HoldsGpus(const KubePod& pod) {
  return pod.Active() && pod.ask.any() && pod.invalid.empty();
}

bool Finished(const KubePod& pod) { return pod.phase == "Succeeded" || pod.phase == "Failed"; }

}  // namespace

void KubeCache::Rebuild() {
  GpuCluster fresh(options_);
  for (const auto& [name, node] : nodes_) fresh.UpsertNode(node);
  for (const auto& [uid, claim] : bound_) {
    if (assumed_.count(uid) == 0) fresh.UpsertPod(claim);
  }
  for (const auto& [uid, a] : assumed_) fresh.UpsertPod(a.claim);
  cluster_ = std::move(fresh);
}

void KubeCache::ReplaceNodes(const std::vector<KubeNode>& nodes) {
  std::unique_lock lock(mu_);
  nodes_.clear();
  for (const KubeNode& n : nodes) nodes_[n.name] = n;
  nodes_synced_ = true;
  ++stats_.node_lists;
  Rebuild();
}

void KubeCache::ReplacePods(const std::vector<KubePod>& pods) {
  std::unique_lock lock(mu_);
  std::unordered_map<std::string, const KubePod*> listed;
  bound_.clear();
  for (const KubePod& p : pods) {
    listed[p.uid] = &p;
    if (HoldsGpus(p)) bound_[p.uid] = ClaimOf(p, options_);
  }
  // An assumption stands only while its pod still exists and is not yet seen bound.
  std::erase_if(assumed_, [&](const auto& entry) {
    auto it = listed.find(entry.first);
    return it == listed.end() || bound_.count(entry.first) > 0 || Finished(*it->second);
  });
  pods_synced_ = true;
  ++stats_.pod_lists;
  Rebuild();
}

void KubeCache::ApplyNode(WatchEventType type, const KubeNode& node) {
  std::unique_lock lock(mu_);
  if (type == WatchEventType::kBookmark) return;
  ++stats_.node_events;
  if (type == WatchEventType::kDeleted) {
    nodes_.erase(node.name);
    cluster_.RemoveNode(node.name);
    return;
  }
  nodes_[node.name] = node;
  cluster_.UpsertNode(node);
}

void KubeCache::ApplyPod(WatchEventType type, const KubePod& pod) {
  std::unique_lock lock(mu_);
  if (type == WatchEventType::kBookmark) return;
  ++stats_.pod_events;
  ExpireAssumptions();
  if (type != WatchEventType::kDeleted && HoldsGpus(pod)) {
    PodClaim claim = ClaimOf(pod, options_);
    auto a = assumed_.find(pod.uid);
    if (a != assumed_.end()) {
      // Our own bind: the annotations were patched before the Binding, so they are normally
      // here; keep the GPUs we chose if the watch delivered a version without them.
      if (claim.annotated_gpus.empty() && a->second.claim.node == claim.node) {
        claim.annotated_gpus = a->second.claim.annotated_gpus;
      }
      assumed_.erase(a);
    }
    bound_[pod.uid] = claim;
    cluster_.UpsertPod(std::move(claim));
    return;
  }
  bound_.erase(pod.uid);
  if (type != WatchEventType::kDeleted && !Finished(pod) && assumed_.count(pod.uid) > 0) {
    return;  // our Binding is still on its way: the assumption stands
  }
  assumed_.erase(pod.uid);
  cluster_.RemovePod(pod.uid);
}

bool KubeCache::synced() const {
  std::shared_lock lock(mu_);
  return nodes_synced_ && pods_synced_;
}

void KubeCache::Assume(PodClaim claim) {
  std::unique_lock lock(mu_);
  ExpireAssumptions();
  claim.assumed = true;
  const std::string uid = claim.uid;
  cluster_.UpsertPod(claim);
  assumed_[uid] = Assumption{std::move(claim), clock_.NowMs() + assume_ttl_ms_};
}

void KubeCache::Forget(const std::string& uid) {
  std::unique_lock lock(mu_);
  if (assumed_.erase(uid) == 0) return;
  cluster_.RemovePod(uid);
  if (auto it = bound_.find(uid); it != bound_.end()) cluster_.UpsertPod(it->second);
}

void KubeCache::ExpireAssumptions() {
  const TimeMs now = clock_.NowMs();
  for (auto it = assumed_.begin(); it != assumed_.end();) {
    if (it->second.expires_ms > now) {
      ++it;
      continue;
    }
    const std::string uid = it->first;
    it = assumed_.erase(it);
    cluster_.RemovePod(uid);
    if (auto b = bound_.find(uid); b != bound_.end()) cluster_.UpsertPod(b->second);
  }
}

std::unique_lock<std::mutex> KubeCache::LockNode(const std::string& node) {
  std::mutex* m;
  {
    std::lock_guard guard(node_locks_mu_);
    auto& slot = node_locks_[node];
    if (!slot) slot = std::make_unique<std::mutex>();
    m = slot.get();
  }
  return std::unique_lock<std::mutex>(*m);
}

KubeCache::Stats KubeCache::stats() const {
  std::shared_lock lock(mu_);
  Stats s = stats_;
  s.assumed = static_cast<int64_t>(assumed_.size());
  return s;
}

}  // namespace gpusched::extender
