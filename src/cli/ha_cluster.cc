#include "cli/ha_cluster.h"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "cli/certs.h"
#include "cli/client.h"
#include "cli/e2e_driver.h"

namespace gpusched::cli {

namespace fs = std::filesystem;

HaCluster::~HaCluster() { KillAll(); }

void HaCluster::KillAll() {
  for (auto& a : agents_) a->Kill(SIGKILL);
  for (auto& s : servers_) s->Kill(SIGKILL);
  if (etcd_) etcd_->KillAll();
}

std::string HaCluster::server_address(int i) const {
  return "127.0.0.1:" + std::to_string(ports_[static_cast<size_t>(i)]);
}

std::string HaCluster::servers() const {
  std::string out;
  for (int i = 0; i < o_.servers; ++i) out += (i ? "," : "") + server_address(i);
  return out;
}

Status HaCluster::Start() {
  fs::create_directories(o_.dir);
  store::LocalEtcd::Options eo;
  eo.dir = (o_.dir / "etcd").string();
  eo.members = o_.etcd_members;
  if (o_.etcd_tls) GS_RETURN_IF_ERROR(MakeEtcdTls(eo));
  GS_ASSIGN_OR_RETURN(etcd_, store::LocalEtcd::Start(eo));
  // Quick liveness so that a killed agent's tasks are noticed within seconds.
  std::ofstream(o_.dir / "server.yaml") << "node_heartbeat: 250ms\nnode_timeout: 10s\n"
                                           "task_heartbeat: 500ms\ntask_timeout: 10s\n"
                                           "kill_grace: 2s\n";
  for (int i = 0; i < o_.servers; ++i) {
    ports_.push_back(FreeLoopbackPort());
    http_ports_.push_back(FreeLoopbackPort());
    servers_.push_back(std::make_unique<ChildProcess>());
    GS_RETURN_IF_ERROR(StartServer(i));
  }
  GS_RETURN_IF_ERROR(WaitForLeader(30'000).status());
  for (int i = 0; i < o_.agents; ++i) {
    agents_.push_back(std::make_unique<ChildProcess>());
    GS_RETURN_IF_ERROR(StartAgent(i));
  }
  const int leader = Leader();
  return E2eDriver(server_address(leader < 0 ? 0 : leader)).WaitForNodes(o_.agents, 60'000);
}

namespace {
constexpr const char* kEtcdClientName = "gpusched-etcd";
}  // namespace

Status HaCluster::MakeEtcdTls(store::LocalEtcd::Options& eo) {
  const fs::path tls = o_.dir / "tls";
  CertsRequest req;
  req.dir = tls.string();
  req.agents = {kEtcdClientName};
  GS_RETURN_IF_ERROR(InitCerts(req).status());
  const fs::path client = tls / "nodes" / kEtcdClientName / kEtcdClientName;
  eo.cert_file = (tls / "server" / "server.crt").string();
  eo.key_file = (tls / "server" / "server.key").string();
  eo.client_ca_file = (tls / "ca" / "ca.crt").string();
  GS_ASSIGN_OR_RETURN(eo.client.tls, store::LoadEtcdTls(eo.client_ca_file,
                                                        client.string() + ".crt",
                                                        client.string() + ".key"));
  return Status::Ok();
}

Status HaCluster::StartServer(int i) {
  const std::string name = "server-" + std::to_string(i);
  std::vector<std::string> args = {
      "server", "--store", "etcd", "--etcd", etcd_->client_urls(), "--listen",
      server_address(i), "--http", "127.0.0.1:" + std::to_string(http_ports_[static_cast<size_t>(i)]),
      "--lease-ttl", std::to_string(o_.lease_ttl_s) + "s", "--config",
      (o_.dir / "server.yaml").string()};
  if (o_.etcd_tls) {
    const fs::path tls = o_.dir / "tls";
    const fs::path client = tls / "nodes" / kEtcdClientName / kEtcdClientName;
    args.insert(args.end(), {"--etcd-ca", (tls / "ca" / "ca.crt").string(), "--etcd-cert",
                             client.string() + ".crt", "--etcd-key", client.string() + ".key"});
  }
  return servers_[static_cast<size_t>(i)]->Start(args, (o_.dir / (name + ".log")).string());
}

Status HaCluster::StartAgent(int i) {
  const std::string name = "ha-" + std::to_string(i);
  return agents_[static_cast<size_t>(i)]->Start(
      {"agent", "--server", servers(), "--name", name, "--gpus", o_.gpus, "--data-dir",
       (o_.dir / name).string(), "--listen", "127.0.0.1:0", "--executor", o_.executor},
      (o_.dir / (name + ".log")).string());
}

int HaCluster::Leader() const {
  for (int i = 0; i < o_.servers; ++i) {
    if (!servers_[static_cast<size_t>(i)]->running()) continue;
    Client c(server_address(i));
    v1::ServerStatusRequest req;
    v1::ServerStatus st;
    Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().GetServerStatus(&ctx, req, &st); },
                      1);
    if (s.ok() && st.role() == "leader") return i;
  }
  return -1;
}

StatusOr<int> HaCluster::WaitForLeader(int64_t timeout_ms, int not_this) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int l = Leader();
    if (l >= 0 && l != not_this) return l;
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("no server became leader within " + std::to_string(timeout_ms) +
                         " ms (logs in " + o_.dir.string() + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gpusched::cli
