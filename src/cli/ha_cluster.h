#pragma once
// HaCluster: a highly available control plane on loopback, every part a real process: a
// 3-member etcd cluster (store/local_etcd.h), N `gpusched server --store etcd` and M agents
// that know every server. For `gpusched dev --ha`, `gpusched ha-demo` and
// `gpusched bench failover`; everything is killed when the object goes.
//
// Thread-safety: none; one owner.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/subprocess.h"
#include "store/local_etcd.h"

namespace gpusched::cli {

struct HaClusterOptions {
  std::filesystem::path dir;
  int servers = 3;
  int agents = 2;
  std::string gpus = "2x16GiB";
  int64_t lease_ttl_s = 5;
  std::string executor = "process";
  int etcd_members = 3;
  // Issue 38: etcd serves its clients over TLS and asks each for a certificate (made under
  // DIR/tls by `certs init`); the servers present DIR/tls/nodes/gpusched-etcd/.
  bool etcd_tls = true;
};

class HaCluster {
 public:
  explicit HaCluster(HaClusterOptions o) : o_(std::move(o)) {}
  ~HaCluster();
  // Starts etcd, the servers and the agents; waits until one server leads and every agent
  // is connected.
  Status Start();
  // "127.0.0.1:P0,127.0.0.1:P1,..." (what clients and agents are given).
  std::string servers() const;
  std::string server_address(int i) const;
  int http_port(int i) const { return http_ports_[static_cast<size_t>(i)]; }
  // The index of the server that says it leads, -1 when none answers so.
  int Leader() const;
  // Waits up to `timeout_ms` for a leader other than `not_this` (-1: any).
  StatusOr<int> WaitForLeader(int64_t timeout_ms, int not_this = -1) const;
  ChildProcess& server(int i) { return *servers_[static_cast<size_t>(i)]; }
  Status StartServer(int i);
  store::LocalEtcd& etcd() { return *etcd_; }
  void KillAll();

 private:
  Status StartAgent(int i);
  // DIR/tls and the LocalEtcd options that serve etcd over it (etcd_tls).
  Status MakeEtcdTls(store::LocalEtcd::Options& eo);
  HaClusterOptions o_;
  std::unique_ptr<store::LocalEtcd> etcd_;
  std::vector<int> ports_, http_ports_;
  std::vector<std::unique_ptr<ChildProcess>> servers_, agents_;
};

}  // namespace gpusched::cli
