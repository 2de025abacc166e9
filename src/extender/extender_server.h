#pragma once
// ExtenderServer: serves an Extender over HTTP the way kube-scheduler calls it (PROTOCOL.md
// 2): POST <url-prefix>/<verb> with a JSON body, answered 200 with a JSON body, always (a
// fault goes in the body, where kube-scheduler reads it). Also GET /healthz (the process
// answers) and GET /readyz (200 once the node cache has synced, or when there is none).
//
// Thread-safety: Start and Stop from one thread; requests are served by httplib's pool.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "extender/extender.h"

namespace httplib {
class Server;
}

namespace gpusched::extender {

struct ServerOptions {
  std::string listen = "127.0.0.1:8888";  // host:port; port 0 picks a free one
  std::string url_prefix = "/gpusched";   // "" serves /filter, /prioritize, ...
};

// "/gpusched/" -> "/gpusched", "gpusched" -> "/gpusched", "/" -> "".
std::string NormalizeUrlPrefix(const std::string& prefix);

class ExtenderServer {
 public:
  // `ready` says whether /readyz answers 200 (may be empty: always ready).
  static StatusOr<std::unique_ptr<ExtenderServer>> Start(Extender& extender,
                                                         const ServerOptions& options,
                                                         std::function<bool()> ready = {});
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  int port() const { return port_; }
  const std::string& url_prefix() const { return prefix_; }
  // Stops accepting, finishes requests in flight, joins. Idempotent.
  void Stop();

 private:
  ExtenderServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  std::string prefix_;
};

}  // namespace gpusched::extender
