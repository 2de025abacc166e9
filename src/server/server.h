#pragma once
// Server: `gpusched server` as an object, so `gpusched dev`, the demo and the end-to-end
// benchmark run the very same server in-process. It wires the store (SQLite in the data
// directory, or etcd), the ControlPlane and its scheduling loop, the gRPC API and agent link,
// the probe daemon and the HTTP endpoint (/metrics, /healthz).
//
// With etcd (store: etcd) several servers run at once: each serves gRPC and HTTP from the
// start as a standby ("not leader; leader is ADDR"), campaigns through LeaderElection, and
// the elected one restores the whole state from etcd and leads until it steps down.
//
// Thread-safety: Start, Shutdown and Wait from one thread; the rest runs on its own threads.

#include <memory>
#include <string>

#include "base/status.h"
#include "server/server_config.h"

namespace gpusched::server {

class Server {
 public:
  static StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "127.0.0.1:40123": the gRPC address actually bound (port 0 in the config picks one).
  const std::string& address() const;
  // The HTTP port bound, 0 if none.
  int http_port() const;
  // Whether this server leads (always, without etcd).
  bool leading() const;
  // Issue 35: a fresh agent token of node `node` (an in-process cluster with --auth token and
  // no TLS gives its agents one). Unavailable on a standby.
  StatusOr<std::string> CreateAgentToken(const std::string& node);
  // Issue 39 (SIGHUP): the leading control plane reads --config again
  // (ControlPlane::ReloadConfig); Unavailable on a standby.
  Status ReloadConfig();
  // Stops serving; in-flight streams are cancelled. Idempotent.
  void Shutdown();
  // Blocks until Shutdown (from another thread or a signal handler's helper).
  void Wait();

  struct Impl;  // opaque: gRPC, HTTP and store types stay out of this header

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::server
