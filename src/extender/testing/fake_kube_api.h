#pragma once
// FakeKubeApi: an in-memory Kubernetes API server behind the KubeApi seam, for tests.
// Every change (PutNode, DeletePod, a patch, a binding, ...) is one watch event with the next
// resource version, and open watches deliver it at once. Failures are injected on demand:
// lists that fail, watches dropped mid-stream, versions that expired (410), failing or slow
// calls.
//
// Thread-safety: thread-safe; watches block on their own threads.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "extender/kube_api.h"

namespace gpusched::extender::testing {

class FakeKubeApi final : public KubeApi {
 public:
  // `clock` paces SetCallDelayMs (a FakeClock with auto-advance makes slow calls instant).
  explicit FakeKubeApi(Clock& clock) : clock_(clock) {}

  // ---- the cluster ----
  void PutNode(KubeNode node);  // add or replace
  void DeleteNode(const std::string& name);
  void PutPod(KubePod pod);     // add or replace, by UID
  void DeletePod(const std::string& uid);
  std::optional<KubePod> FindPod(const std::string& uid) const;

  // ---- failures ----
  void FailLists(int count, Status status);  // the next `count` list calls fail
  void DropWatches(Status status);           // every open watch ends now with `status`
  // Watches that start from a version older than the current one get FailedPrecondition
  // (HTTP 410), as after etcd compaction.
  void ExpireHistory();
  void FailNextGetPod(Status status);
  void FailNextPatch(Status status);
  void FailNextBinding(Status status);
  void SetCallDelayMs(DurationMs ms);  // every call first sleeps this long on the clock
  // The next GetPod answers with this UID instead of the pod's (a recreated pod).
  void ReportUidOnce(const std::string& uid);

  // ---- observations ----
  struct PatchCall {
    std::string ns, name;
    std::map<std::string, std::string> annotations;
  };
  struct BindingCall {
    std::string ns, name, uid, node;
  };
  std::vector<PatchCall> patches() const;
  std::vector<BindingCall> bindings() const;
  int list_calls() const;
  int watch_calls() const;
  int open_watches() const;

  // ---- KubeApi ----
  StatusOr<KubeList<KubeNode>> ListNodes() override;
  StatusOr<KubeList<KubePod>> ListPods() override;
  Status WatchNodes(const std::string& resource_version, const NodeEventFn& on_event) override;
  Status WatchPods(const std::string& resource_version, const PodEventFn& on_event) override;
  StatusOr<KubePod> GetPod(const std::string& ns, const std::string& name) override;
  Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                             const std::map<std::string, std::string>& annotations) override;
  Status PostBinding(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& node) override;
  void Shutdown() override;

 private:
  struct Event {
    int64_t version = 0;
    bool node = false;  // else pod
    WatchEventType type = WatchEventType::kAdded;
    KubeNode node_object;
    KubePod pod_object;
  };
  void Delay();
  // REQUIRES: mu_ held. Records a change as the next watch event.
  void Record(Event e);
  // REQUIRES: mu_ held. Counts a list call; its injected failure, if any.
  Status StartList();
  // REQUIRES: mu_ held. The injected failure (once), else Ok.
  static Status TakeFailure(std::optional<Status>& failure);
  KubePod* FindByName(const std::string& ns, const std::string& name);
  template <typename T, typename Fn>
  Status Watch(bool nodes, const std::string& resource_version, const Fn& on_event);

  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t version_ = 1;
  int64_t history_floor_ = 0;  // watches from below this version get 410
  std::map<std::string, KubeNode> nodes_;
  std::map<std::string, KubePod> pods_;  // by UID
  std::vector<Event> events_;
  int lists_to_fail_ = 0;
  Status list_failure_;
  int64_t drop_generation_ = 0;
  Status drop_status_;
  std::optional<Status> get_failure_, patch_failure_, binding_failure_;
  std::optional<std::string> reported_uid_;
  DurationMs delay_ms_ = 0;
  bool shut_down_ = false;
  std::vector<PatchCall> patches_;
  std::vector<BindingCall> bindings_;
  int list_calls_ = 0, watch_calls_ = 0, open_watches_ = 0;
};

}  // namespace gpusched::extender::testing
