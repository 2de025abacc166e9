#include "extender/extender.h"

#include <algorithm>
#include <exception>

#include "extender/json_reader.h"

namespace gpusched::extender {
namespace {

// Kubernetes object names (DNS subdomains): they go into API paths, so nothing else passes.
Status CheckObjectName(std::string_view field, const std::string& value) {
  const bool ok = !value.empty() && value.size() <= 253 &&
                  std::all_of(value.begin(), value.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                           c == '.';
                  });
  if (ok) return Status::Ok();
  return InvalidArgument("bind request: " + std::string(field) + ": \"" + value +
                         "\" is not a Kubernetes object name");
}

// The annotations a bind writes: gpusched's (indices, MiB) and, for a shared GPU, the five
// gpushare names its device plugin reads (PROTOCOL.md 7.2), in gpushare units.
std::map<std::string, std::string> BindAnnotations(const KubePod& pod, const core::Placement& p,
                                                   const KubeNode& node, MiB unit_mib,
                                                   TimeMs now_ms) {
  std::map<std::string, std::string> a;
  a[std::string(names::kAnnGpuIndices)] = FormatGpuIndices(p.gpus);
  if (p.exclusive || p.gpus.size() != 1) return a;
  const MiB mib = p.gpu_mem_mib[0];
  a[std::string(names::kAnnGpuMemMib)] = std::to_string(mib);
  const int64_t pod_units =
      pod.ask.gpushare_units > 0 ? pod.ask.gpushare_units : (mib + unit_mib - 1) / unit_mib;
  const int64_t dev_units = node.gpushare_units_per_gpu > 0
                                ? node.gpushare_units_per_gpu
                                : EffectiveMibPerGpu(node, unit_mib) / unit_mib;
  a[std::string(names::kAnnGpushareIdx)] = std::to_string(p.gpus[0]);
  a[std::string(names::kAnnGpusharePod)] = std::to_string(pod_units);
  a[std::string(names::kAnnGpushareDev)] = std::to_string(dev_units);
  a[std::string(names::kAnnGpushareAssigned)] = "false";
  a[std::string(names::kAnnGpushareAssumeTime)] = std::to_string(now_ms * 1'000'000);
  return a;
}

}  // namespace

std::string Extender::HandleRequest(std::string_view verb, std::string_view body) {
  try {
    if (verb == "filter") return Filter(body);
    if (verb == "prioritize") return Prioritize(body);
    if (verb == "bind") return Bind(body);
    if (verb == "preempt") return Preempt(body);
    return WriteBindingResult("gpusched extender: unknown verb \"" + std::string(verb) +
                              "\" (serves filter, prioritize, bind, preempt)");
  } catch (const std::exception& e) {  // allocation failure and the like: still answer
    Log(std::string("gpusched extender: ") + std::string(verb) + ": " + e.what());
    return WriteBindingResult(std::string("gpusched extender: internal error: ") + e.what());
  }
}

GpuCluster Extender::ClusterOfRequest(const ExtenderArgs& args) const {
  GpuCluster cluster(config_.model);
  for (const KubeNode& node : args.nodes) cluster.UpsertNode(node);
  if (cache_ == nullptr) return cluster;
  std::vector<PodClaim> claims;
  cache_->Read([&](const GpuCluster& cached) {
    for (const std::string& name : args.names) {
      for (const std::string& uid : cached.PodsOn(name)) claims.push_back(*cached.Pod(uid));
    }
    return 0;
  });
  for (PodClaim& claim : claims) cluster.UpsertPod(std::move(claim));
  return cluster;
}

std::string Extender::Filter(std::string_view body) {
  auto doc = JsonDoc::Parse(body, "filter request");
  if (!doc.ok()) return WriteFilterError(doc.status().message());
  auto args = ParseExtenderArgs(*doc, "filter request");
  if (!args.ok()) return WriteFilterError(args.status().message());
  const PodRequest request = MakePodRequest(args->pod, config_.model);
  auto verdicts = Judge(*args, [&](const GpuCluster& c) {
    return FilterNodes(c, request, args->names, config_.decisions);
  });
  if (!verdicts.ok()) return WriteFilterError("gpusched: " + verdicts.status().message());
  FilterResult result;
  result.node_list = args->node_list;
  for (size_t i = 0; i < verdicts->size(); ++i) {
    NodeVerdict& v = (*verdicts)[i];
    if (v.fits) {
      result.passed.push_back(v.node);
      if (args->node_list) result.passed_json.push_back(args->node_json[i]);
    } else if (v.resolvable) {
      result.failed[v.node] = std::move(v.reason);
    } else {
      result.unresolvable[v.node] = std::move(v.reason);
    }
  }
  return WriteFilterResult(result);
}

std::string Extender::Prioritize(std::string_view body) {
  // HostPriorityList has no error field and kube-scheduler ignores a failed prioritize,
  // so a fault answers [] (no opinion) and is logged.
  auto doc = JsonDoc::Parse(body, "prioritize request");
  if (!doc.ok()) {
    Log("gpusched extender: " + doc.status().message());
    return "[]";
  }
  auto args = ParseExtenderArgs(*doc, "prioritize request");
  if (!args.ok()) {
    Log("gpusched extender: " + args.status().message());
    return "[]";
  }
  const PodRequest request = MakePodRequest(args->pod, config_.model);
  auto scores = Judge(*args, [&](const GpuCluster& c) {
    return ScoreNodes(c, request, args->names, config_.decisions);
  });
  if (!scores.ok()) {
    Log("gpusched extender: prioritize: " + scores.status().message());
    return "[]";
  }
  return WritePriorities(*scores);
}

std::string Extender::Bind(std::string_view body) {
  auto doc = JsonDoc::Parse(body, "bind request");
  if (!doc.ok()) return WriteBindingResult(doc.status().message());
  auto args = ParseBindingArgs(*doc);
  if (!args.ok()) return WriteBindingResult(args.status().message());
  const Status st = BindPod(*args);
  if (!st.ok()) {
    Log("gpusched extender: bind " + args->pod_namespace + "/" + args->pod_name + " to " +
        args->node + " failed: " + st.message());
    return WriteBindingResult(st.message());
  }
  return WriteBindingResult("");
}

Status Extender::BindPod(const BindingArgs& args) {
  GS_RETURN_IF_ERROR(CheckObjectName("PodNamespace", args.pod_namespace));
  GS_RETURN_IF_ERROR(CheckObjectName("PodName", args.pod_name));
  const std::string key = args.pod_namespace + "/" + args.pod_name;
  if (api_ == nullptr) {
    return FailedPrecondition("gpusched: cannot bind " + key +
                              ": the extender has no Kubernetes API (start it with --kube-api)");
  }
  GS_ASSIGN_OR_RETURN(const KubePod pod, LivePod(args, key));
  if (pod.node_name == args.node) return Status::Ok();  // already bound there (a retry)
  if (!pod.node_name.empty()) {
    return FailedPrecondition("gpusched: pod " + key + " is already bound to " + pod.node_name);
  }
  const PodRequest request = MakePodRequest(pod, config_.model);
  if (!request.invalid.empty()) return InvalidArgument("gpusched: " + request.invalid);
  if (!request.wants_gpus || cache_ == nullptr) {
    if (request.wants_gpus) {
      return FailedPrecondition("gpusched: cannot bind " + key +
                                ": the extender has no node cache to choose GPUs from");
    }
    return api_->PostBinding(args.pod_namespace, args.pod_name, pod.uid, args.node);
  }
  return BindWithGpus(args, key, pod, request);
}

// The live pod, checked against the UID kube-scheduler scheduled: a pod deleted and
// recreated under the same name must not inherit this decision.
StatusOr<KubePod> Extender::LivePod(const BindingArgs& args, const std::string& key) {
  auto pod = api_->GetPod(args.pod_namespace, args.pod_name);
  if (pod.ok() && !args.pod_uid.empty() && pod->uid != args.pod_uid) {
    pod = api_->GetPod(args.pod_namespace, args.pod_name);  // a stale read is possible
  }
  if (!pod.ok()) return Status(pod.status().code(), "gpusched: pod " + key + ": " + pod.status().message());
  if (!args.pod_uid.empty() && pod->uid != args.pod_uid) {
    return FailedPrecondition("gpusched: pod " + key + ": UID mismatch: kube-scheduler binds " +
                              args.pod_uid + " but the API server has " + pod->uid +
                              " (the pod was deleted and recreated)");
  }
  return pod;
}

Status Extender::BindWithGpus(const BindingArgs& args, const std::string& key,
                              const KubePod& pod, const PodRequest& request) {
  // From choosing the GPUs to posting the Binding, no other bind to this node runs; the
  // assumption makes the reservation visible to every filter at once.
  auto node_lock = cache_->LockNode(args.node);
  using Choice = std::pair<core::Placement, std::map<std::string, std::string>>;
  auto choice = cache_->Read([&](const GpuCluster& c) -> StatusOr<Choice> {
    GS_ASSIGN_OR_RETURN(core::Placement p, ChooseGpus(c, request, args.node, config_.decisions));
    auto annotations = BindAnnotations(pod, p, *c.Node(args.node),
                                       config_.model.gpushare_unit_mib, clock_.NowMs());
    return Choice{std::move(p), std::move(annotations)};
  });
  if (!choice.ok()) {
    return Status(choice.status().code(), "The node " + args.node + " can't place the pod " +
                                              key + ": " + choice.status().message());
  }
  PodClaim claim = ClaimOf(pod, config_.model);
  claim.node = args.node;
  claim.annotated_gpus = choice->first.gpus;
  cache_->Assume(claim);
  Status st = api_->PatchPodAnnotations(args.pod_namespace, args.pod_name, choice->second);
  if (st.ok()) st = api_->PostBinding(args.pod_namespace, args.pod_name, pod.uid, args.node);
  if (!st.ok()) {
    cache_->Forget(pod.uid);
    return Status(st.code(), "gpusched: binding " + key + " to " + args.node + ": " + st.message());
  }
  Log("gpusched extender: bound " + key + " to " + args.node + " GPUs " +
      FormatGpuIndices(choice->first.gpus) + " (" + request.Describe() + ")");
  return Status::Ok();
}

std::string Extender::Preempt(std::string_view body) {
  auto doc = JsonDoc::Parse(body, "preempt request");
  if (!doc.ok()) return WritePreemptionResult({}, doc.status().message());
  auto args = ParsePreemptionArgs(*doc);
  if (!args.ok()) return WritePreemptionResult({}, args.status().message());
  if (cache_ == nullptr || !cache_->synced()) {
    // Without the bound pods the GPUs cannot be judged: kube-scheduler's proposal stands.
    return WritePreemptionResult(args->proposals);
  }
  const PodRequest request = MakePodRequest(args->pod, config_.model);
  const auto kept = cache_->Read([&](const GpuCluster& c) {
    return ChooseVictims(c, request, args->proposals, config_.decisions);
  });
  Log("gpusched extender: preempt for " + args->pod.Key() + ": " +
      std::to_string(kept.size()) + " of " + std::to_string(args->proposals.size()) +
      " candidate nodes kept");
  return WritePreemptionResult(kept);
}

}  // namespace gpusched::extender
