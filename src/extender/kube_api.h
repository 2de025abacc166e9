#pragma once
// KubeApi: the extender's one seam to the Kubernetes API server. HttpKubeApi
// (kube_api_http.h) is the real implementation; testing/fake_kube_api.h is an in-memory fake
// that can drop watches, fail calls and answer slowly.
//
// Thread-safety: implementations are thread-safe; the two watches run on their own threads
// while binds call the other methods.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "extender/kube_objects.h"

namespace gpusched::extender {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

template <typename T>
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  T object;  // for kBookmark only its resource_version is meaningful
};

template <typename T>
struct KubeList {
  std::vector<T> items;
  std::string resource_version;  // where a watch of the same collection resumes
};

using NodeEventFn = std::function<bool(const WatchEvent<KubeNode>&)>;
using PodEventFn = std::function<bool(const WatchEvent<KubePod>&)>;

class KubeApi {
 public:
  virtual ~KubeApi() = default;

  virtual StatusOr<KubeList<KubeNode>> ListNodes() = 0;
  // Pods of every namespace that are not finished (Succeeded or Failed).
  virtual StatusOr<KubeList<KubePod>> ListPods() = 0;

  // Blocks and calls `on_event` for each change after `resource_version`, until the server
  // ends the stream (Ok: watch again from the last version seen), the stream fails
  // (Unavailable, Internal, ...), the version is too old to resume from (FailedPrecondition:
  // list again), `on_event` returns false (Ok) or Shutdown() is called (Cancelled-like
  // Unavailable).
  virtual Status WatchNodes(const std::string& resource_version, const NodeEventFn& on_event) = 0;
  virtual Status WatchPods(const std::string& resource_version, const PodEventFn& on_event) = 0;

  virtual StatusOr<KubePod> GetPod(const std::string& ns, const std::string& name) = 0;
  // Sets (adds or replaces) the given annotations of the pod.
  virtual Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::string>& annotations) = 0;
  // POSTs a v1 Binding of the pod (name, namespace and UID) to `node`.
  virtual Status PostBinding(const std::string& ns, const std::string& name,
                             const std::string& uid, const std::string& node) = 0;

  // Ends every watch in flight and makes later calls fail fast. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace gpusched::extender
