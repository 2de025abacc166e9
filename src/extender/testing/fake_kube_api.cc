#include "extender/testing/fake_kube_api.h"

#include <charconv>
#include <type_traits>

namespace gpusched::extender::testing {

void FakeKubeApi::Record(Event e) {
  e.version = ++version_;
  if (e.node) {
    e.node_object.resource_version = std::to_string(e.version);
  } else {
    e.pod_object.resource_version = std::to_string(e.version);
  }
  events_.push_back(std::move(e));
  cv_.notify_all();
}

void FakeKubeApi::PutNode(KubeNode node) {
  std::lock_guard lock(mu_);
  Event e;
  e.node = true;
  e.type = nodes_.count(node.name) ? WatchEventType::kModified : WatchEventType::kAdded;
  const std::string name = node.name;
  e.node_object = std::move(node);
  Record(std::move(e));
  nodes_[name] = events_.back().node_object;
}

void FakeKubeApi::DeleteNode(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  Event e;
  e.node = true;
  e.type = WatchEventType::kDeleted;
  e.node_object = it->second;
  nodes_.erase(it);
  Record(std::move(e));
}

void FakeKubeApi::PutPod(KubePod pod) {
  std::lock_guard lock(mu_);
  Event e;
  e.type = pods_.count(pod.uid) ? WatchEventType::kModified : WatchEventType::kAdded;
  e.pod_object = pod;
  Record(std::move(e));
  pod.resource_version = events_.back().pod_object.resource_version;
  pods_[pod.uid] = std::move(pod);
}

void FakeKubeApi::DeletePod(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  Event e;
  e.type = WatchEventType::kDeleted;
  e.pod_object = it->second;
  pods_.erase(it);
  Record(std::move(e));
}

std::optional<KubePod> FakeKubeApi::FindPod(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

void FakeKubeApi::FailLists(int count, Status status) {
  std::lock_guard lock(mu_);
  lists_to_fail_ = count;
  list_failure_ = std::move(status);
}

void FakeKubeApi::DropWatches(Status status) {
  std::lock_guard lock(mu_);
  ++drop_generation_;
  drop_status_ = std::move(status);
  cv_.notify_all();
}

void FakeKubeApi::ExpireHistory() {
  std::lock_guard lock(mu_);
  history_floor_ = version_;
  ++drop_generation_;
  drop_status_ = FailedPrecondition("watch: too old resource version (410 Gone)");
  cv_.notify_all();
}

void FakeKubeApi::FailNextGetPod(Status status) {
  std::lock_guard lock(mu_);
  get_failure_ = std::move(status);
}

void FakeKubeApi::FailNextPatch(Status status) {
  std::lock_guard lock(mu_);
  patch_failure_ = std::move(status);
}

void FakeKubeApi::FailNextBinding(Status status) {
  std::lock_guard lock(mu_);
  binding_failure_ = std::move(status);
}

void FakeKubeApi::SetCallDelayMs(DurationMs ms) {
  std::lock_guard lock(mu_);
  delay_ms_ = ms;
}

void FakeKubeApi::ReportUidOnce(const std::string& uid) {
  std::lock_guard lock(mu_);
  reported_uid_ = uid;
}

std::vector<FakeKubeApi::PatchCall> FakeKubeApi::patches() const {
  std::lock_guard lock(mu_);
  return patches_;
}

std::vector<FakeKubeApi::BindingCall> FakeKubeApi::bindings() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

int FakeKubeApi::list_calls() const {
  std::lock_guard lock(mu_);
  return list_calls_;
}

int FakeKubeApi::watch_calls() const {
  std::lock_guard lock(mu_);
  return watch_calls_;
}

int FakeKubeApi::open_watches() const {
  std::lock_guard lock(mu_);
  return open_watches_;
}

void FakeKubeApi::Delay() {
  DurationMs ms;
  {
    std::lock_guard lock(mu_);
    ms = delay_ms_;
  }
  if (ms > 0) clock_.SleepMs(ms);
}

Status FakeKubeApi::StartList() {
  ++list_calls_;
  if (shut_down_) return Unavailable("fake API: shut down");
  if (lists_to_fail_ > 0) {
    --lists_to_fail_;
    return list_failure_;
  }
  return Status::Ok();
}

Status FakeKubeApi::TakeFailure(std::optional<Status>& failure) {
  if (!failure) return Status::Ok();
  Status s = *failure;
  failure.reset();
  return s;
}

StatusOr<KubeList<KubeNode>> FakeKubeApi::ListNodes() {
  Delay();
  std::lock_guard lock(mu_);
  GS_RETURN_IF_ERROR(StartList());
  KubeList<KubeNode> list;
  for (const auto& [name, n] : nodes_) list.items.push_back(n);
  list.resource_version = std::to_string(version_);
  return list;
}

StatusOr<KubeList<KubePod>> FakeKubeApi::ListPods() {
  Delay();
  std::lock_guard lock(mu_);
  GS_RETURN_IF_ERROR(StartList());
  KubeList<KubePod> list;
  for (const auto& [uid, p] : pods_) {
    if (p.phase != "Succeeded" && p.phase != "Failed") list.items.push_back(p);
  }
  list.resource_version = std::to_string(version_);
  return list;
}

template <typename T, typename Fn>
Status FakeKubeApi::Watch(bool nodes, const std::string& resource_version, const Fn& on_event) {
  Delay();
  std::unique_lock lock(mu_);
  ++watch_calls_;
  if (shut_down_) return Unavailable("fake API: shut down");
  int64_t from = version_;
  if (!resource_version.empty()) {
    std::from_chars(resource_version.data(), resource_version.data() + resource_version.size(),
                    from);
  }
  if (from < history_floor_) {
    return FailedPrecondition("watch: too old resource version " + resource_version +
                              " (410 Gone)");
  }
  ++open_watches_;
  cv_.notify_all();
  const int64_t generation = drop_generation_;
  size_t next = 0;
  Status result;
  while (true) {
    // Deliver every event after `from` of this collection, in order, without the lock.
    while (next < events_.size()) {
      const Event e = events_[next++];
      if (e.version <= from || e.node != nodes) continue;
      WatchEvent<T> we;
      we.type = e.type;
      if constexpr (std::is_same_v<T, KubeNode>) {
        we.object = e.node_object;
      } else {
        we.object = e.pod_object;
      }
      lock.unlock();
      const bool go_on = on_event(we);
      lock.lock();
      if (!go_on) {
        --open_watches_;
        return Status::Ok();
      }
    }
    if (shut_down_) {
      result = Unavailable("fake API: shut down");
      break;
    }
    if (drop_generation_ != generation) {
      result = drop_status_;
      break;
    }
    cv_.wait(lock);
  }
  --open_watches_;
  return result;
}

Status FakeKubeApi::WatchNodes(const std::string& resource_version, const NodeEventFn& on_event) {
  return Watch<KubeNode>(true, resource_version, on_event);
}

Status FakeKubeApi::WatchPods(const std::string& resource_version, const PodEventFn& on_event) {
  return Watch<KubePod>(false, resource_version, on_event);
}

KubePod* FakeKubeApi::FindByName(const std::string& ns, const std::string& name) {
  for (auto& [uid, p] : pods_) {
    if (p.ns == ns && p.name == name) return &p;
  }
  return nullptr;
}

StatusOr<KubePod> FakeKubeApi::GetPod(const std::string& ns, const std::string& name) {
  Delay();
  std::lock_guard lock(mu_);
  GS_RETURN_IF_ERROR(TakeFailure(get_failure_));
  KubePod* p = FindByName(ns, name);
  if (p == nullptr) return NotFound("pods \"" + name + "\" not found in " + ns);
  KubePod copy = *p;
  if (reported_uid_) {
    copy.uid = *reported_uid_;
    reported_uid_.reset();
  }
  return copy;
}

Status FakeKubeApi::PatchPodAnnotations(const std::string& ns, const std::string& name,
                                        const std::map<std::string, std::string>& annotations) {
  Delay();
  std::lock_guard lock(mu_);
  GS_RETURN_IF_ERROR(TakeFailure(patch_failure_));
  KubePod* p = FindByName(ns, name);
  if (p == nullptr) return NotFound("pods \"" + name + "\" not found in " + ns);
  patches_.push_back({ns, name, annotations});
  auto indices = annotations.find(std::string(names::kAnnGpuIndices));
  if (indices == annotations.end()) indices = annotations.find(std::string(names::kAnnGpushareIdx));
  if (indices != annotations.end()) {
    if (auto gpus = ParseGpuIndices(indices->second)) p->annotated_gpus = *gpus;
  }
  Event e;
  e.type = WatchEventType::kModified;
  e.pod_object = *p;
  Record(std::move(e));
  p->resource_version = events_.back().pod_object.resource_version;
  return Status::Ok();
}

Status FakeKubeApi::PostBinding(const std::string& ns, const std::string& name,
                                const std::string& uid, const std::string& node) {
  Delay();
  std::lock_guard lock(mu_);
  GS_RETURN_IF_ERROR(TakeFailure(binding_failure_));
  KubePod* p = FindByName(ns, name);
  if (p == nullptr) return NotFound("pods \"" + name + "\" not found in " + ns);
  if (p->uid != uid) return FailedPrecondition("binding: UID " + uid + " does not match");
  if (!p->node_name.empty()) return AlreadyExists("pod " + name + " is already assigned");
  bindings_.push_back({ns, name, uid, node});
  p->node_name = node;
  p->phase = "Pending";
  Event e;
  e.type = WatchEventType::kModified;
  e.pod_object = *p;
  Record(std::move(e));
  p->resource_version = events_.back().pod_object.resource_version;
  return Status::Ok();
}

void FakeKubeApi::Shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

}  // namespace gpusched::extender::testing
