#pragma once
// LocalEtcd: an etcd cluster of real `etcd` processes on loopback ports chosen at start, for
// `gpusched dev --ha`, `gpusched bench failover` and the tests. Members can be killed,
// stopped (SIGSTOP) and restarted on their data, so tests make etcd itself fail.
//
// Thread-safety: none; one owner.

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/subprocess.h"
#include "store/etcd_client.h"

namespace gpusched::store {

class LocalEtcd {
 public:
  struct Options {
    std::string dir;           // data and logs: DIR/m0, DIR/m0.log, ...
    int members = 3;
    std::string etcd = "etcd";  // the binary (PATH lookup)
    // Issue 38: serve clients over TLS (https:// client URLs) with this server certificate
    // and key (naming 127.0.0.1), and with `client_ca_file` ask every client for a
    // certificate signed by it (etcd's --client-cert-auth). Peers talk plaintext on loopback.
    std::string cert_file, key_file, client_ca_file;
    EtcdClient::Options client;  // what LocalEtcd's own health checks dial with (TLS, user)
  };
  // Starts every member and waits (up to 20 s) until the cluster answers a read.
  static StatusOr<std::unique_ptr<LocalEtcd>> Start(Options options);
  // Whether an etcd binary is installed (tests skip without one).
  static bool Installed(const std::string& etcd = "etcd");
  ~LocalEtcd();  // SIGKILL to every member

  // "http://127.0.0.1:P0,http://127.0.0.1:P1,..."
  std::string client_urls() const;
  const std::vector<std::string>& client_url_list() const { return client_urls_; }
  int members() const { return static_cast<int>(procs_.size()); }
  // SIGKILL (and reap) one member; its data stays.
  void Kill(int member);
  void KillAll();
  // Starts a killed member again on its data.
  Status Restart(int member);
  // Waits until a read through every running member's URL succeeds.
  Status WaitHealthy(int timeout_ms);

 private:
  explicit LocalEtcd(Options options) : options_(std::move(options)) {}
  std::vector<std::string> Args(int member) const;

  Options options_;
  std::vector<std::string> client_urls_, peer_urls_;
  std::string token_;
  std::vector<std::unique_ptr<ChildProcess>> procs_;
};

}  // namespace gpusched::store
