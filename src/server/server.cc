#include "server/server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/host_port.h"
#include "base/log.h"
#include "base/private_dir.h"
#include "server/async_agent_link.h"
#include "server/async_queue.h"
#include "server/async_submit.h"
#include "server/api_service.h"
#include "server/control_plane.h"
#include "rpc/grpc_log.h"
#include "rpc/leader_hint.h"
#include "rpc/tls.h"
#include "server/control_plane_gate.h"
#include "server/http_door.h"
#include "server/http_routes.h"
#include "server/leader_election.h"
#include "server/probe_daemon.h"
#include "store/etcd_store.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"

namespace gpusched::server {

struct Server::Impl {
  ServerConfig config;
  RealClock clock;
  ControlPlaneGate gate;
  std::unique_ptr<ApiService> api;
  AsyncQueue queue;  // Submit and every agent's stream
  std::unique_ptr<AsyncSubmit> submit;
  std::unique_ptr<AsyncAgentLink> link;
  std::unique_ptr<grpc::Server> grpc;
  std::string address;  // bound
  std::string advertise;
  std::string store_kind;
  std::optional<rpc::ServerTls> tls;  // set when config.tls_dir is
  // Who calls with authentication off (issue 35): the owners of loopback connections.
  std::unique_ptr<PeerIdentity> peers;
  // The leader's parts; with etcd, built at every take-over and dropped when stepping down.
  std::mutex role_mu;   // take-over and step-down against Shutdown
  std::shared_ptr<ControlPlane> cp;
  std::unique_ptr<ProbeDaemon> probe;
  int64_t leader_since_ms = 0;
  // HTTP: the leader's routes, or a standby's /healthz and "not leader" answers.
  std::mutex http_mu;
  std::unique_ptr<httplib::Server> http;
  std::thread http_thread;
  std::string http_host;
  int http_port = 0;
  std::unique_ptr<LeaderElection> election;
  std::mutex mu;
  std::condition_variable cv;
  bool down = false;

  // A start that failed after the queue began (the HTTP port was taken) ends here: the
  // gRPC server stops, then the queue drains, while the server object still exists (a
  // pending request is finished on the queue's thread and reads it); then the control plane
  // lets go of the submissions it was given (their calls are freed while the server
  // exists; the gate would keep it until after). Server::Shutdown did all of it already,
  // in this order.
  ~Impl() {
    if (grpc) grpc->Shutdown(std::chrono::system_clock::now());
    StopQueue();
    StopControlPlane();
  }
  // After the queue drained: the loop stops, and the control plane lets go of the agents'
  // calls while the gRPC server still exists (issue 43: a disconnection the loop did not
  // apply before it stopped leaves its call in the registry, and the gate may keep the
  // control plane until after the server is gone).
  void StopControlPlane() {
    if (!cp) return;
    cp->StopLoop();
    cp->DisconnectAgents();
  }
  // After the gRPC server's Shutdown: no call is requested any more, then the queue drains.
  void StopQueue() {
    if (submit) submit->Stop();
    if (link) link->Stop();
    queue.Stop();
  }
};

namespace {

// state.db and its -wal and -shm files readable by this user only: state.db is created
// 0600 before SQLite opens it (SQLite gives a new WAL and SHM the database's mode), and
// files an older version left 0644 are narrowed. The directory is private already.
Status NarrowStateFiles(const std::string& dir, const char* file = "state.db") {
  const std::string db = dir + "/" + file;
  const int fd = open(db.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("data_dir: cannot open " + db + ": " + std::strerror(errno));
  const bool narrowed = fchmod(fd, 0600) == 0;
  const int err = errno;
  close(fd);
  if (!narrowed) return Internal("data_dir: cannot chmod " + db + ": " + std::strerror(err));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const int side = open((db + suffix).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (side < 0) continue;  // not there (or a symlink, which SQLite's open refuses too)
    (void)fchmod(side, 0600);
    close(side);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<store::StateStore>> OpenSqlite(const ServerConfig& config) {
  if (config.data_dir.empty()) return std::unique_ptr<store::StateStore>(new store::MemoryStore);
  GS_RETURN_IF_ERROR(EnsurePrivateDir(config.data_dir, "data_dir"));
  GS_RETURN_IF_ERROR(NarrowStateFiles(config.data_dir));
  store::SqliteStore::Options options;
  options.fsync_every_commit = config.fsync_every_commit;
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::SqliteStore> s,
                      store::SqliteStore::Open(config.data_dir + "/state.db", options));
  return std::unique_ptr<store::StateStore>(std::move(s));
}

// Issue 38: DATA_DIR/archive.db (0600: it holds the records) for history_retention; none
// without a data directory or with retention 0 (nothing is then deleted from the store).
Status AttachArchive(const ServerConfig& config, ControlPlane& cp) {
  if (config.history_retention_ms <= 0) return Status::Ok();
  if (config.data_dir.empty()) {
    logging::Warn("server", "history_retention: no data directory for the archive; finished "
                            "tasks stay in the store (give --data-dir)");
    return Status::Ok();
  }
  GS_RETURN_IF_ERROR(EnsurePrivateDir(config.data_dir, "data_dir"));
  GS_RETURN_IF_ERROR(NarrowStateFiles(config.data_dir, "archive.db"));
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::SqliteArchive> archive,
                      store::SqliteArchive::Open(config.data_dir + "/archive.db"));
  cp.SetArchive(std::move(archive));
  return Status::Ok();
}

std::string LeaderKey(const ServerConfig& c) { return c.etcd_prefix + "/leader"; }

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The routes a standby serves: /healthz (200, its role in the body) and, for everything
// else, 503 naming the leader.
void RegisterStandbyRoutes(httplib::Server& http, ControlPlaneGate& gate) {
  http.Get("/healthz", [&gate](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = {{"status", "ok"}, {"role", "standby"}, {"leader", gate.leader()}};
    if (!gate.detail().empty()) j["detail"] = gate.detail();
    res.set_content(j.dump() + "\n", "application/json");
  });
  auto not_leader = [&gate](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    nlohmann::json j = {{"error", rpc::NotLeaderMessage(gate.leader(), gate.detail())},
                        {"leader", gate.leader()}};
    res.set_content(j.dump() + "\n", "application/json");
  };
  http.Get(".*", not_leader);
  http.Post(".*", not_leader);
}

// The names the HTTP endpoint answers to (http_door.h): the hosts of --listen, --http and
// --advertise (every-address hosts aside) and the config's http_hosts.
std::set<std::string> ServedNames(const ServerConfig& c) {
  std::set<std::string> names;
  for (const std::string& a : {c.listen, c.http, c.advertise}) {
    std::string host = rpc::HostOf(a);
    if (!host.empty()) names.insert(host);
  }
  std::stringstream extra(c.http_hosts);
  for (std::string name; std::getline(extra, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) names.insert(name);
  }
  for (std::string n : std::set<std::string>(names)) {
    names.erase(n);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return std::tolower(ch); });
    names.insert(n);
  }
  return names;
}

// Every request passes the door (http_door.h) before its route: Host, Origin, body size,
// and credentials before a body is read (the leader's; a standby reads no body of size).
void SetDoor(Server::Impl& s, const std::shared_ptr<ControlPlane>& cp, int port) {
  auto hosts = std::make_shared<HostAllowList>(ServedNames(s.config), port);
  Authenticator authenticate;
  if (cp) {
    ControlPlane* plane = cp.get();  // outlives the HTTP server (StepDown stops it first)
    authenticate = [plane](const httplib::Request& req) {
      return plane->Authenticate(req.get_header_value("Authorization"),
                                 req.get_header_value("X-Gpusched-User"))
          .status();
    };
  }
  const size_t max_body = static_cast<size_t>(s.config.http_max_body);
  s.http->set_pre_routing_handler(
      [hosts, authenticate, max_body](const httplib::Request& req, httplib::Response& res) {
        return CheckAtTheDoor(*hosts, max_body, authenticate, req, res);
      });
}

// (Re)starts the HTTP endpoint on the configured address with the routes of the current role.
// The port stays the same across role changes (bound again at once: SO_REUSEADDR).
// The HTTP door's server object, HTTPS with --tls-dir, with the door's limits and its errors
// as JSON.
static Status MakeHttpServer(Server::Impl& s) {
  HttpDoorLimits limits;
  limits.max_body = static_cast<size_t>(s.config.http_max_body);
  limits.header_timeout_ms = s.config.http_header_timeout_ms;
  limits.max_connections = static_cast<size_t>(s.config.http_max_connections);
  if (s.tls) {
    auto https = std::make_unique<GuardedHttpsServer>(s.tls->cert_file.c_str(),
                                                      s.tls->key_file.c_str(), limits);
    if (!https->is_valid()) {
      return FailedPrecondition("tls_dir: HTTPS cannot use " + s.tls->cert_file + " and " +
                                s.tls->key_file + " (do they belong together?)");
    }
    s.http = std::move(https);
  } else {
    s.http = std::make_unique<GuardedHttpServer>(limits);
  }
  AnswerErrorsAsJson(*s.http);  // httplib's own refusals too (issue 41)
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server bind
  // the same port. Re-binding our own port after a role change still works (the old socket
  // is closed first).
  s.http->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  return Status::Ok();
}

// Binds the HTTP port: --http's, or the one bound before a role change (retried while the old
// socket closes). Returns it.
static StatusOr<int> BindHttp(Server::Impl& s, const HostPort& hp) {
  const int want = s.http_port > 0 ? s.http_port : hp.port;
  int port = -1;
  for (int attempt = 0; attempt < 20 && port <= 0; ++attempt) {
    port = want == 0 ? s.http->bind_to_any_port(hp.host)
                     : (s.http->bind_to_port(hp.host, want) ? want : -1);
    if (port <= 0 && s.http_port > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (s.http_port == 0) break;
  }
  if (port <= 0) {
    return FailedPrecondition("http: cannot listen on " + s.config.http +
                              ": address already in use");
  }
  return port;
}

Status StartHttp(Server::Impl& s, const std::shared_ptr<ControlPlane>& cp) {
  if (s.config.http.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(s.http_mu);
  if (s.http) {
    s.http->stop();
    if (s.http_thread.joinable()) s.http_thread.join();
    s.http.reset();
  }
  GS_ASSIGN_OR_RETURN(const HostPort hp, ParseHostPort(s.config.http, "http"));
  GS_RETURN_IF_ERROR(MakeHttpServer(s));
  if (cp) {
    if (s.config.store == "etcd") {
      s.http->Get("/healthz", [&s](const httplib::Request&, httplib::Response& res) {
        nlohmann::json j = {{"status", "ok"}, {"role", "leader"}, {"leader", s.advertise}};
        res.set_content(j.dump() + "\n", "application/json");
      });
    }
    RegisterHttpRoutes(*s.http, *cp, s.peers.get());
  } else {
    RegisterStandbyRoutes(*s.http, s.gate);
  }
  GS_ASSIGN_OR_RETURN(const int port, BindHttp(s, hp));
  s.http_port = port;
  SetDoor(s, cp, port);
  httplib::Server* raw = s.http.get();
  auto done = std::make_shared<std::atomic<bool>>(false);
  s.http_thread = std::thread([raw, done] {
    raw->listen_after_bind();
    *done = true;
  });
  // httplib's stop() acts only once the listening loop has begun (is_running()): a stop that
  // came first, a SIGTERM right after start, left the loop running and StopHttp's join waiting
  // forever (seen under ASan, where threads start slowly). Start returns once it serves.
  while (!raw->is_running() && !*done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void StopHttp(Server::Impl& s) {
  std::lock_guard<std::mutex> lock(s.http_mu);
  if (!s.http) return;
  s.http->stop();
  if (s.http_thread.joinable()) s.http_thread.join();
  s.http.reset();
}

// Writes `text` to a new file `path`, readable by this user only: whatever was there (a
// file someone else created, a symlink) is removed first and the file is created afresh
// (O_EXCL), so it is this user's whoever made the name before.
Status WriteSecretFile(const std::string& path, const std::string& text) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Internal("admin-token: cannot remove the old " + path + ": " + std::strerror(errno));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("admin-token: cannot write " + path + ": " + std::strerror(errno));
  bool ok = fchmod(fd, 0600) == 0 &&
            write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            fsync(fd) == 0;
  const int err = errno;
  ok = close(fd) == 0 && ok;
  if (!ok) return Internal("admin-token: cannot write " + path + ": " + std::strerror(err));
  return Status::Ok();
}

// Authentication on and no token at all (a first start): creates an admin token and writes
// it to DATA_DIR/admin-token, so an operator can create the others. The token itself is never
// printed. Without a data directory (etcd, or a memory store) nothing is created and the
// operator is told how to get one.
Status BootstrapAdminToken(const ServerConfig& config, ControlPlane& cp) {
  if (!cp.auth_enabled() || cp.TokenCount() > 0) return Status::Ok();
  if (config.data_dir.empty()) {
    logging::Warn("server",
                  "authentication is on and no token exists, and there is no "
                  "--data-dir to write the first admin token to: start this server (one server "
                  "of an HA control plane suffices) once with --data-dir DIR; DIR/admin-token "
                  "then holds an admin token");
    return Status::Ok();
  }
  GS_RETURN_IF_ERROR(EnsurePrivateDir(config.data_dir, "data_dir"));
  GS_ASSIGN_OR_RETURN(MintedToken m, cp.CreateToken("admin", "default", true));
  const std::string path = config.data_dir + "/admin-token";
  if (Status w = WriteSecretFile(path, m.token + "\n"); !w.ok()) {
    (void)cp.RevokeToken(m.record.id);  // nobody could use it
    return w;
  }
  std::ostringstream line;
  line << "authentication is on; wrote the first admin token (id " << m.record.id << ") to "
       << path << " (mode 0600); create users' tokens with GPUSCHED_TOKEN=$(cat " << path
       << ") gpusched token create --user NAME";
  logging::Info("server", line.str());
  return Status::Ok();
}

// Starts leading with `store`: restores the control plane, its loop and probe daemon, and
// opens the gate.
Status Lead(Server::Impl& s, std::unique_ptr<store::StateStore> store) {
  GS_ASSIGN_OR_RETURN(std::unique_ptr<ControlPlane> cp,
                      ControlPlane::Create(s.config, s.clock, std::move(store)));
  GS_RETURN_IF_ERROR(AttachArchive(s.config, *cp));
  GS_RETURN_IF_ERROR(BootstrapAdminToken(s.config, *cp));
  std::lock_guard<std::mutex> lock(s.role_mu);
  s.cp = std::shared_ptr<ControlPlane>(std::move(cp));
  s.cp->StartLoop();
  s.probe = std::make_unique<ProbeDaemon>(*s.cp, s.clock);
  s.probe->Start();
  s.leader_since_ms = WallMs();
  s.gate.SetLeader(s.cp, s.advertise);
  return StartHttp(s, s.cp);
}

// Stops leading: closes the gate first (new calls hear "not leader"), then stops the loop,
// the probe daemon and every agent stream (agents reconnect, to the new leader).
void StepDown(Server::Impl& s, const std::string& why, bool restart_http) {
  std::shared_ptr<ControlPlane> cp;
  std::unique_ptr<ProbeDaemon> probe;
  {
    std::lock_guard<std::mutex> lock(s.role_mu);
    s.gate.SetStandby("", why);
    cp = std::move(s.cp);
    probe = std::move(s.probe);
    s.leader_since_ms = 0;
  }
  if (probe) probe->Stop();
  if (cp) {
    cp->StopLoop();
    cp->DisconnectAgents();
  }
  if (restart_http) {
    if (Status st = StartHttp(s, nullptr); !st.ok()) {
      logging::Error("server", st.message());
    }
  }
}

v1::ServerStatus StatusOf(Server::Impl& s, store::EtcdClient* etcd) {
  v1::ServerStatus st;
  st.set_address(s.advertise);
  st.set_store(s.store_kind);
  const bool leading = s.gate.leading();
  st.set_role(leading ? "leader" : "standby");
  st.set_leader(s.gate.leader());
  st.set_detail(s.gate.detail());
  if (auto cp = s.gate.Get(); leading && cp.ok()) {  // issue 39: a store that disappeared
    if (Status health = (*cp)->StoreHealth(); !health.ok()) st.set_detail(health.message());
  }
  if (s.http_port > 0) st.set_http(FormatHostPort(s.http_host, s.http_port));
  if (s.config.store == "etcd") {
    st.set_lease_ttl_ms(s.config.lease_ttl_ms);
    if (etcd != nullptr) {
      for (const store::EtcdMemberStatus& m : etcd->MemberStatuses()) {
        v1::EtcdMember* e = st.add_etcd();
        e->set_endpoint(m.endpoint);
        e->set_healthy(m.healthy);
        e->set_error(m.error);
        e->set_version(m.version);
        e->set_raft_leader(m.member_id != 0 && m.member_id == m.leader_id);
        e->set_db_size(m.db_size);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.role_mu);
    st.set_leader_since_ms(s.leader_since_ms);
  }
  return st;
}

// gRPC credentials: plaintext, or TLS with the server's certificate, asking every client
// for a certificate of the cluster CA and verifying it when one is presented (agents
// present theirs; CLI users connect with TLS and no certificate, and authenticate otherwise).
std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(const Server::Impl& s) {
  if (!s.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = s.tls->ca_pem;
  o.pem_key_cert_pairs.push_back({s.tls->key_pem, s.tls->cert_pem});
  return grpc::SslServerCredentials(o);
}

}  // namespace

// The addresses' syntax first (CheckExposure reads their hosts, and a bad port is not a
// matter of exposure), then what they expose.
static StatusOr<std::pair<HostPort, HostPort>> CheckAddresses(const ServerConfig& config) {
  GS_ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(config.listen, "listen"));
  HostPort http;
  if (!config.http.empty()) {
    GS_ASSIGN_OR_RETURN(http, ParseHostPort(config.http, "http"));
  }
  bool insecure_warning = false;
  GS_RETURN_IF_ERROR(CheckExposure(config, &insecure_warning));
  if (insecure_warning) {
    logging::Warn("server",
                  "WARNING: --insecure: serving " + config.listen +
                      (config.http.empty() ? "" : " and http " + config.http) +
                      " to other machines WITHOUT " +
                      (config.tls_dir.empty() ? "TLS" : "authentication") +
                      ". Anyone who reaches these ports can run any command on every node. Use "
                      "`gpusched certs init` and --tls-dir outside a network you fully trust.");
  }
  return std::make_pair(listen, http);
}

// The gRPC server: the API, the agents' link and the submissions' completion queue on
// --listen. Returns the port bound.
static StatusOr<int> StartGrpc(Server::Impl& s) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(s.config.listen, GrpcCredentials(s), &port);
  // gRPC turns SO_REUSEPORT on by default: a second server on the same port would start
  // and share the calls with the first at random. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(s.api.get());
  s.link->Register(builder);
  s.queue.Register(builder);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Agents ping every second to notice a leader that stopped answering (SIGSTOP, a
  // partition) and move on; without this the server would answer their pings with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // gRPC's synchronous server keeps between MIN and MAX idle threads polling for calls; a
  // thread that finds more than MAX idle ones exits, and one is started whenever fewer than
  // MIN wait. It serves the API calls but Submit (the agents' streams and Submit are on the
  // completion queue). Every idle poller also takes the queue's network events and hands
  // them over: with 64 of them (needed while each agent's stream held a synchronous thread)
  // `bench e2e --executor noop --clients 16` ran 3,512 / 3,644 / 3,897 tasks/s, with 2
  // 4,012 / 3,719 / 3,876 (alternating runs). 4 (as fast as 2) leaves room for API calls
  // that arrive together.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 4);
  // gRPC logs why a port could not be bound; that reason goes into our message instead.
  // Captured for this call only: what the thread logs after it is written as usual.
  std::string bind_failure;
  {
    rpc::GrpcLogCapture bind_log;
    s.grpc = builder.BuildAndStart();
    if (!s.grpc || port == 0) {
      bind_failure = rpc::ListenFailureReason(bind_log);
    } else {
      bind_log.Replay();
    }
  }
  if (!bind_failure.empty()) {
    return FailedPrecondition("listen: cannot listen on " + s.config.listen + ": " + bind_failure +
                              (bind_failure.find("in use") != std::string::npos
                                   ? " (is another gpusched running?)"
                                   : ""));
  }
  return port;
}

// Issue 38: the TLS and user every etcd client of this server uses, from the config's files.
static StatusOr<store::EtcdClient::Options> EtcdTrust(const ServerConfig& c) {
  store::EtcdClient::Options o;
  GS_ASSIGN_OR_RETURN(o.tls, store::LoadEtcdTls(c.etcd_ca, c.etcd_cert, c.etcd_key));
  if (!c.etcd_user.empty()) {
    o.user = c.etcd_user;
    GS_ASSIGN_OR_RETURN(o.password, store::ReadEtcdPassword(c.etcd_password_file));
  }
  return o;
}

// HA: the etcd store a new leader commits through, fenced by its leader key's revision.
static Status LeadOnEtcd(Server::Impl& s, const std::vector<std::string>& endpoints,
                         int64_t revision) {
  // A write stuck on a member that lost its raft leader moves on to another member after
  // 1.5 s instead of waiting out etcd's 7 s; the store's commit sequence makes the resend
  // safe. Under the CLI's 5 s per try, so a client sees the write, not its own timeout.
  GS_ASSIGN_OR_RETURN(store::EtcdClient::Options co, EtcdTrust(s.config));
  co.connect_timeout_ms = 500;
  co.request_timeout_ms = 1'500;
  co.retry_for_ms = 4'000;
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::EtcdClient> c, store::EtcdClient::Create(endpoints, co));
  store::EtcdStore::Options so;
  so.prefix = s.config.etcd_prefix;
  so.max_txn_ops = static_cast<size_t>(s.config.etcd_max_txn_ops);
  so.max_request_bytes = static_cast<size_t>(s.config.etcd_max_request_bytes);
  so.fence = {LeaderKey(s.config), revision};
  so.on_fenced = [&s](const Status& why) {
    if (s.election) s.election->Depose(why.message());
  };
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::EtcdStore> store, store::EtcdStore::Open(std::move(c), so));
  return Lead(s, std::move(store));
}

// HA: a standby that campaigns for the leader key; it leads once elected.
static Status StartElection(Server::Impl& s, const std::vector<std::string>& endpoints) {
  s.gate.SetStandby("", "campaigning");
  GS_RETURN_IF_ERROR(StartHttp(s, nullptr));
  GS_ASSIGN_OR_RETURN(store::EtcdClient::Options eco, EtcdTrust(s.config));
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::EtcdClient> election_client,
                      store::EtcdClient::Create(endpoints, eco));
  LeaderElection::Options eo;
  eo.key = LeaderKey(s.config);
  eo.identity = s.advertise;
  eo.ttl_s = s.config.lease_ttl_ms / 1000;
  LeaderElection::Callbacks cb;
  cb.on_elected = [&s, endpoints](int64_t revision) { return LeadOnEtcd(s, endpoints, revision); };
  cb.on_deposed = [&s](const std::string& why) { StepDown(s, why, true); };
  cb.on_standby = [&s](const std::string& leader, const std::string& detail) {
    if (!s.gate.leading()) s.gate.SetStandby(leader, detail);
  };
  s.election = std::make_unique<LeaderElection>(s.clock, std::move(election_client), eo, cb);
  s.election->Start();
  return Status::Ok();
}

// A single server leads from the start, before it serves anything: its store and control
// plane.
static Status OpenSingle(Server::Impl& s) {
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::StateStore> store, OpenSqlite(s.config));
  GS_ASSIGN_OR_RETURN(std::unique_ptr<ControlPlane> cp,
                      ControlPlane::Create(s.config, s.clock, std::move(store)));
  GS_RETURN_IF_ERROR(AttachArchive(s.config, *cp));
  GS_RETURN_IF_ERROR(BootstrapAdminToken(s.config, *cp));
  s.cp = std::shared_ptr<ControlPlane>(std::move(cp));
  return Status::Ok();
}

// A single server's loop, HTTP and probe daemon, once it serves gRPC.
static Status StartSingle(Server::Impl& s) {
  s.gate.SetLeader(s.cp, s.advertise);
  s.leader_since_ms = WallMs();
  GS_RETURN_IF_ERROR(StartHttp(s, s.cp));
  s.cp->StartLoop();
  s.probe = std::make_unique<ProbeDaemon>(*s.cp, s.clock);
  s.probe->Start();
  return Status::Ok();
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  GS_RETURN_IF_ERROR(config.Validate());
  GS_ASSIGN_OR_RETURN(const auto addresses, CheckAddresses(config));
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.config = config;
  s.http_host = addresses.second.host;
  s.peers = std::make_unique<PeerIdentity>(nullptr, config.default_user);
  if (!config.tls_dir.empty()) {
    GS_ASSIGN_OR_RETURN(s.tls, rpc::LoadServerTls(config.tls_dir));
  }
  const bool ha = config.store == "etcd";
  s.store_kind = ha ? "etcd" : (config.data_dir.empty() ? "memory" : "sqlite");
  std::vector<std::string> endpoints;
  std::shared_ptr<store::EtcdClient> status_client;
  if (ha) {
    GS_ASSIGN_OR_RETURN(endpoints, store::ParseEtcdEndpoints(config.etcd, "etcd"));
    GS_ASSIGN_OR_RETURN(store::EtcdClient::Options o, EtcdTrust(config));
    o.connect_timeout_ms = 300;
    o.request_timeout_ms = 1'000;
    GS_ASSIGN_OR_RETURN(std::unique_ptr<store::EtcdClient> c, store::EtcdClient::Create(endpoints, o));
    status_client = std::move(c);
  } else {
    GS_RETURN_IF_ERROR(OpenSingle(s));
  }
  s.api = std::make_unique<ApiService>(s.gate, [&s, status_client] {
    return StatusOf(s, status_client.get());
  });
  s.submit = std::make_unique<AsyncSubmit>(*s.api, s.queue);
  s.link = std::make_unique<AsyncAgentLink>(s.gate, s.queue,
                                            /*require_client_cert=*/s.tls.has_value());
  GS_ASSIGN_OR_RETURN(const int port, StartGrpc(s));
  {
    // A numeric --listen host is where loopback connections arrive; otherwise any.
    const std::string host = rpc::HostOf(config.listen);
    s.api->SetPeerIdentity(s.peers.get(), rpc::IsIpAddress(host) ? host : "", port);
  }
  s.submit->Start();
  s.link->Start();
  s.queue.Start();
  s.address = FormatHostPort(addresses.first.host, port);
  s.advertise = config.advertise.empty() ? s.address : config.advertise;
  GS_RETURN_IF_ERROR(ha ? StartElection(s, endpoints) : StartSingle(s));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

const std::string& Server::address() const { return impl_->address; }
int Server::http_port() const { return impl_->http_port; }
bool Server::leading() const { return impl_->gate.leading(); }

StatusOr<std::string> Server::CreateAgentToken(const std::string& node) {
  GS_ASSIGN_OR_RETURN(std::shared_ptr<ControlPlane> cp, impl_->gate.Get());
  GS_ASSIGN_OR_RETURN(MintedToken m, cp->CreateAgentToken(node));
  return m.token;
}

Status Server::ReloadConfig() {
  GS_ASSIGN_OR_RETURN(std::shared_ptr<ControlPlane> cp, impl_->gate.Get());
  return cp->ReloadConfig().status();
}

void Server::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->down) return;
    impl_->down = true;
  }
  Impl& s = *impl_;
  // Stop campaigning first: a leader resigns (its key goes with its lease), so a standby
  // takes over at once.
  if (s.election) {
    s.election->Stop();
    StepDown(s, "shutting down", false);
  }
  StopHttp(s);
  if (s.probe) s.probe->Stop();
  s.grpc->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  s.StopQueue();  // after the calls ended
  s.StopControlPlane();
  s.cv.notify_all();
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->down; });
}

}  // namespace gpusched::server
