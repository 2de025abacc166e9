#include "extender/kube_sync.h"

#include <algorithm>

namespace gpusched::extender {

void KubeSync::Start() {
  stopping_ = false;
  nodes_thread_ = std::thread([this] { Run(Kind::kNodes); });
  pods_thread_ = std::thread([this] { Run(Kind::kPods); });
}

void KubeSync::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  api_.Shutdown();
  if (nodes_thread_.joinable()) nodes_thread_.join();
  if (pods_thread_.joinable()) pods_thread_.join();
}

KubeSync::Stats KubeSync::stats() const {
  return {node_lists_.load(), pod_lists_.load(), node_failures_.load(), pod_failures_.load()};
}

bool KubeSync::Backoff(DurationMs ms) {
  std::unique_lock lock(mu_);
  clock_.WaitFor(lock, cv_, ms, [this] { return stopping_.load(); });
  return !stopping_;
}

void KubeSync::Run(Kind kind) {
  const char* what = kind == Kind::kNodes ? "nodes" : "pods";
  DurationMs backoff = options_.backoff_initial_ms;
  while (!stopping_) {
    bool listed = false;
    const Status st = ListAndWatch(kind, listed);
    if (stopping_) break;
    if (listed) backoff = options_.backoff_initial_ms;  // the failures before are over
    (kind == Kind::kNodes ? node_failures_ : pod_failures_)++;
    Log(std::string("gpusched extender: ") + what + " informer: " + st.ToString() +
        "; listing again");
    if (st.code() == StatusCode::kFailedPrecondition) continue;  // too old: relist at once
    if (!Backoff(backoff)) break;
    backoff = std::min(backoff * 2, options_.backoff_max_ms);
  }
}

Status KubeSync::ListAndWatch(Kind kind, bool& listed) {
  std::string version;
  if (kind == Kind::kNodes) {
    auto list = api_.ListNodes();
    if (!list.ok()) return list.status();
    cache_.ReplaceNodes(list->items);
    ++node_lists_;
    version = list->resource_version;
  } else {
    auto list = api_.ListPods();
    if (!list.ok()) return list.status();
    cache_.ReplacePods(list->items);
    ++pod_lists_;
    version = list->resource_version;
  }
  listed = true;
  while (!stopping_) {
    Status st;
    if (kind == Kind::kNodes) {
      st = api_.WatchNodes(version, [&](const WatchEvent<KubeNode>& e) {
        if (stopping_) return false;
        cache_.ApplyNode(e.type, e.object);
        if (!e.object.resource_version.empty()) version = e.object.resource_version;
        return true;
      });
    } else {
      st = api_.WatchPods(version, [&](const WatchEvent<KubePod>& e) {
        if (stopping_) return false;
        cache_.ApplyPod(e.type, e.object);
        if (!e.object.resource_version.empty()) version = e.object.resource_version;
        return true;
      });
    }
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace gpusched::extender
