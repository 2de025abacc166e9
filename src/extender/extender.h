#pragma once
// Extender: kube-scheduler's four extender verbs over gpusched's decisions, as functions from
// a request body to a response body. No sockets here (extender_server.h serves them over
// HTTP), so a fuzzer or a test calls HandleRequest directly.
//
//   filter      which candidates can take the pod's GPUs; every other node with its reason in
//               FailedNodes (preemption may help) or FailedAndUnresolvableNodes (never here)
//   prioritize  0..10 per candidate from core's weighted score plugins
//   bind        chooses the GPUs (CN109992422A claims 3-4), records the reservation at once,
//               annotates the pod (gpusched and gpushare names), then POSTs the Binding;
//               checks PodUID against the API server first
//   preempt     keeps, per node, the victims that really make GPU room (decisions.h)
//
// Modes (PROTOCOL.md 4): a request with Nodes (nodeCacheCapable: false) is judged on those
// Node objects; one with NodeNames on the KubeCache's nodes. Either way the pods already
// bound come from the KubeCache (and this extender's own binds), so two pods never get the
// same GPU memory. Faults (bad JSON, a cache that has not synced) go in Error; "does not
// fit" never does.
//
// Thread-safety: HandleRequest may be called from many threads at once.

#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/clock.h"
#include "extender/decisions.h"
#include "extender/gpu_cluster.h"
#include "extender/kube_api.h"
#include "extender/kube_cache.h"
#include "extender/protocol.h"

namespace gpusched::extender {

struct ExtenderConfig {
  ModelOptions model;
  DecisionOptions decisions;
  // Called with one line per bind, preemption and fault; may be empty.
  std::function<void(const std::string&)> log;
};

class Extender {
 public:
  // `cache` and `api` may be null. Without a cache, NodeList requests see no bound pods,
  // NodeNames requests answer Error, and preempt accepts kube-scheduler's proposal; without
  // an api, bind answers Error.
  Extender(ExtenderConfig config, Clock& clock, KubeCache* cache, KubeApi* api)
      : config_(std::move(config)), clock_(clock), cache_(cache), api_(api) {}

  // The response body for `verb` ("filter", "prioritize", "bind", "preempt") and a request
  // body. Never throws; every input gets a well-formed response of the verb's type (an
  // unknown verb gets {"Error": ...}). The fuzz entry point.
  std::string HandleRequest(std::string_view verb, std::string_view body);

  std::string Filter(std::string_view body);
  std::string Prioritize(std::string_view body);
  std::string Bind(std::string_view body);
  std::string Preempt(std::string_view body);

  const ExtenderConfig& config() const { return config_; }

 private:
  // Runs fn(const GpuCluster&) on the cluster the request is judged on: its own nodes with
  // the cache's pods (NodeList mode) or the cache (nodeCache mode, an error until synced).
  template <typename Fn>
  StatusOr<std::invoke_result_t<Fn, const GpuCluster&>> Judge(const ExtenderArgs& args,
                                                               Fn&& fn) const {
    if (args.node_list) {
      const GpuCluster cluster = ClusterOfRequest(args);
      return fn(cluster);
    }
    if (cache_ == nullptr) {
      return FailedPrecondition(
          "NodeNames given but the extender has no node cache (start it with --kube-api, "
          "or configure nodeCacheCapable: false)");
    }
    if (!cache_->synced()) {
      return Unavailable("the node cache has not synced with the API server yet; retry");
    }
    return cache_->Read(fn);
  }
  GpuCluster ClusterOfRequest(const ExtenderArgs& args) const;
  Status BindPod(const BindingArgs& args);
  StatusOr<KubePod> LivePod(const BindingArgs& args, const std::string& key);
  // A pod that asks for GPUs: chooses them on the node, annotates the pod, then binds it.
  Status BindWithGpus(const BindingArgs& args, const std::string& key, const KubePod& pod,
                      const PodRequest& request);
  void Log(const std::string& line) const {
    if (config_.log) config_.log(line);
  }

  const ExtenderConfig config_;
  Clock& clock_;
  KubeCache* const cache_;
  KubeApi* const api_;
};

}  // namespace gpusched::extender
