#pragma once
// HttpKubeApi: KubeApi over the Kubernetes REST API with cpp-httplib.
//
//   lists    GET /api/v1/nodes, /api/v1/pods (pages of 500, finished pods excluded)
//   watches  the same with watch=1, allowWatchBookmarks and a 5-minute server timeout; one
//            JSON event per line; an ERROR event or HTTP 410 is FailedPrecondition (relist)
//   bind     GET the pod; PATCH its annotations (strategic merge patch); POST
//            /api/v1/namespaces/NS/pods/NAME/binding
//
// Authentication: `Authorization: Bearer` with the token read from `token_file` (re-read
// every minute, since service-account tokens rotate). https URLs verify the server against
// `ca_file` (in a pod: the service account's ca.crt); Debian's httplib is built with OpenSSL.
//
// Thread-safety: thread-safe. Ordinary requests share one keep-alive client under a mutex;
// each watch has a client of its own, which Shutdown() closes.

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "base/clock.h"
#include "extender/kube_api.h"

namespace httplib {
class Client;
}

namespace gpusched::extender {

struct KubeApiOptions {
  std::string url;         // http://host:port or https://host:port
  std::string token_file;  // empty: no Authorization header
  std::string ca_file;     // https: the CA bundle to verify the server; empty: system CAs
  int watch_timeout_s = 300;
  int request_timeout_s = 10;
};

class HttpKubeApi final : public KubeApi {
 public:
  // InvalidArgument for an unusable URL or token file (named).
  static StatusOr<std::unique_ptr<HttpKubeApi>> Create(KubeApiOptions options, Clock& clock);
  ~HttpKubeApi() override;

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
  HttpKubeApi(KubeApiOptions options, Clock& clock);
  std::unique_ptr<httplib::Client> NewClient(int read_timeout_s) const;
  // The Authorization header value ("" without a token file).
  StatusOr<std::string> Bearer();
  // GET of one page (or the whole collection); the body on 200.
  StatusOr<std::string> Get(const std::string& path);
  // Watches `collection` ("/api/v1/nodes"), handing each event line to `on_line`.
  // `collection`?watch=1... from `resource_version`, ending after watch_timeout_s.
  std::string WatchPath(const std::string& collection, const std::string& resource_version) const;
  Status Watch(const std::string& collection, const std::string& resource_version,
               const std::function<Status(std::string_view line, bool& go_on)>& on_line);
  template <typename T, typename ParseFn>
  StatusOr<KubeList<T>> ListAll(const std::string& path, ParseFn parse);

  const KubeApiOptions options_;
  Clock& clock_;

  std::mutex token_mu_;
  std::string token_;
  TimeMs token_read_ms_ = -1;

  std::mutex client_mu_;  // guards client_ (one request at a time on it)
  std::unique_ptr<httplib::Client> client_;

  std::mutex watches_mu_;
  std::set<httplib::Client*> watches_;
  std::atomic<bool> shut_down_{false};
};

// Parses one line of a watch stream; kBookmark events carry only the version. ERROR events
// are FailedPrecondition when they say 410 (Gone), else Unavailable. Pure, for tests and
// fuzzing.
StatusOr<WatchEvent<KubeNode>> ParseNodeWatchEvent(std::string_view line);
StatusOr<WatchEvent<KubePod>> ParsePodWatchEvent(std::string_view line);

}  // namespace gpusched::extender
