// Issue 11, trust: `certs init`, gRPC and HTTPS over TLS, agent identity by client
// certificate, the refused unsafe start, and tasks run as their user's Unix account. Real
// `gpusched` processes, real OpenSSL and gRPC TLS.

#include <grp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "harness.h"
#include "rpc/channel.h"
#include "store/local_etcd.h"

namespace gpusched::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace v1 = ::gpusched::v1;
constexpr auto kDeadline = 90s;

std::string TempDir(const std::string& what) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpusched_tls_" + std::to_string(getpid()) + "_" + what);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

mode_t ModeOf(const std::string& path) {
  struct stat st{};
  stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

X509* LoadCert(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return nullptr;
  X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr);
  fclose(f);
  return c;
}

// Whether `leaf` verifies against `ca` as a TLS certificate for `purpose`.
bool Verifies(const std::string& ca, const std::string& leaf, int purpose) {
  X509* ca_cert = LoadCert(ca);
  X509* leaf_cert = LoadCert(leaf);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca_cert);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf_cert, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(leaf_cert);
  X509_free(ca_cert);
  return ok;
}

TEST(CertsInitTest, CreatesVerifiableCertificatesAndAddsAgentsLater) {
  const std::string dir = TempDir("certs") + "/tls";
  const std::string ca = dir + "/ca/ca.crt", srv = dir + "/server", n1d = dir + "/nodes/n1";
  CliResult r = Cli({"certs", "init", dir, "--server-host", "sched.example.com",
                     "--server-host", "10.1.2.3", "--agent", "n1"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& key : {dir + "/ca/ca.key", srv + "/server.key",
                                srv + "/log-reader.key", n1d + "/n1.key"}) {
    EXPECT_EQ(ModeOf(key), 0600u) << key;
  }
  for (const std::string& crt : {ca, srv + "/server.crt", srv + "/ca.crt", n1d + "/n1.crt",
                                n1d + "/ca.crt"}) {
    EXPECT_TRUE(std::filesystem::exists(crt)) << crt;
  }
  EXPECT_TRUE(Verifies(ca, srv + "/server.crt", X509_PURPOSE_SSL_SERVER));
  EXPECT_TRUE(Verifies(ca, n1d + "/n1.crt", X509_PURPOSE_SSL_CLIENT));
  // Both ends of the agents' log service too: the agent serves, the server's log reader is
  // its client.
  EXPECT_TRUE(Verifies(ca, n1d + "/n1.crt", X509_PURPOSE_SSL_SERVER));
  EXPECT_TRUE(Verifies(ca, srv + "/log-reader.crt", X509_PURPOSE_SSL_CLIENT));
  X509* server = LoadCert(srv + "/server.crt");
  ASSERT_NE(server, nullptr);
  for (const char* host : {"sched.example.com", "localhost"}) {
    EXPECT_EQ(X509_check_host(server, host, 0, 0, nullptr), 1) << host;
  }
  for (const char* ip : {"10.1.2.3", "127.0.0.1"}) {
    EXPECT_EQ(X509_check_ip_asc(server, ip, 0), 1) << ip;
  }
  EXPECT_NE(X509_check_host(server, "other.example.com", 0, 0, nullptr), 1);
  X509_free(server);
  X509* n1 = LoadCert(n1d + "/n1.crt");
  EXPECT_EQ(X509_check_host(n1, "n1", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(n1, "gpusched-server", 0, 0, nullptr), 1);
  X509_free(n1);

  // Again, with another agent: the CA and n1 stay as they were, n2 is added.
  const std::string ca_before = ReadFile(ca);
  const std::string ca_key_before = ReadFile(dir + "/ca/ca.key");
  const std::string n1_before = ReadFile(n1d + "/n1.crt");
  r = Cli({"certs", "init", dir, "--agent", "n1", "--agent", "n2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(ca), ca_before);
  EXPECT_EQ(ReadFile(dir + "/ca/ca.key"), ca_key_before);
  EXPECT_EQ(ReadFile(n1d + "/n1.crt"), n1_before);
  EXPECT_NE(r.out.find("created " + dir + "/nodes/n2/n2.crt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kept    " + ca), std::string::npos) << r.out;
  EXPECT_TRUE(Verifies(ca, dir + "/nodes/n2/n2.crt", X509_PURPOSE_SSL_CLIENT));

  // A key without its certificate is never replaced: the run stops, naming both.
  const std::string n2 = dir + "/nodes/n2/n2";
  std::filesystem::remove(n2 + ".crt");
  const std::string n2_key = ReadFile(n2 + ".key");
  r = Cli({"certs", "init", dir, "--agent", "n2"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(n2 + ".key exists but " + n2 + ".crt does not"), std::string::npos)
      << r.err;
  EXPECT_EQ(ReadFile(n2 + ".key"), n2_key);
  // Bad names are refused, naming the flag and the value.
  r = Cli({"certs", "init", dir, "--agent", "../evil"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--agent: \"../evil\""), std::string::npos) << r.err;
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// Issue 35, finding 8: a node's bundle holds its own identity and the CA's certificate, and
// nothing else; the CA key lies apart; the server's certificate is no client (so no node), and
// its client identity (log reader) names no node.
TEST(CertsInitTest, Issue35_OneBundlePerNodeAndTheCaKeyApart) {
  const std::string dir = TempDir("certs") + "/tls";
  CliResult r = Cli({"certs", "init", dir, "--agent", "n1", "--agent", "n2"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto files = [](const std::string& d) {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      out.insert(e.path().filename().string());
    }
    return out;
  };
  EXPECT_EQ(files(dir + "/nodes/n1"), (std::set<std::string>{"ca.crt", "n1.crt", "n1.key"}));
  EXPECT_EQ(files(dir + "/nodes/n2"), (std::set<std::string>{"ca.crt", "n2.crt", "n2.key"}));
  EXPECT_EQ(files(dir + "/ca"), (std::set<std::string>{"ca.crt", "ca.key"}));
  EXPECT_EQ(files(dir + "/server"),
            (std::set<std::string>{"ca.crt", "server.crt", "server.key", "log-reader.crt",
                                   "log-reader.key"}));
  EXPECT_EQ(ModeOf(dir + "/ca"), 0700u);
  EXPECT_EQ(ModeOf(dir + "/ca/ca.key"), 0600u);
  const std::string ca = dir + "/ca/ca.crt";
  EXPECT_EQ(ReadFile(dir + "/nodes/n1/ca.crt"), ReadFile(ca));
  EXPECT_FALSE(Verifies(ca, dir + "/server/server.crt", X509_PURPOSE_SSL_CLIENT));
  EXPECT_FALSE(Verifies(ca, dir + "/server/log-reader.crt", X509_PURPOSE_SSL_SERVER));
  X509* reader = LoadCert(dir + "/server/log-reader.crt");
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(X509_check_host(reader, "gpusched-server", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(reader, "localhost", 0, 0, nullptr), 1);
  X509_free(reader);
  // The old single-folder layout is refused, saying why.
  const std::string old = TempDir("certs-old") + "/old";
  std::filesystem::create_directories(old);
  WriteFile(old + "/ca.key", "x");
  r = Cli({"certs", "init", old, "--agent", "n1"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("old layout"), std::string::npos) << r.err;
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  std::filesystem::remove_all(std::filesystem::path(old).parent_path());
}

// A server with --tls-dir on loopback, and helpers for agents and CLI calls.
class TlsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    tls_ = dir_ + "/tls";
    CliResult r = Cli({"certs", "init", tls_, "--agent", "n1", "--agent", "n2"});
    ASSERT_EQ(r.code, 0) << r.err;
    WriteFile(dir_ + "/server.yaml",
              "node_timeout: 2s\nnode_heartbeat: 200ms\ntask_heartbeat: 300ms\n"
              "task_timeout: 4s\nkill_grace: 1s\n" + extra_config_);
    port_ = FreePort();
    http_port_ = FreePort();
    server_ = Proc({"server", "--listen", server(), "--http",
                    "127.0.0.1:" + std::to_string(http_port_), "--data-dir", dir_ + "/data",
                    "--config", dir_ + "/server.yaml", "--tls-dir", tls_},
                   dir_ + "/server.log");
    ASSERT_TRUE(PollUntil([&] { return Run({"nodes"}).code == 0; }, kDeadline))
        << ReadFile(dir_ + "/server.log");
  }
  void TearDown() override {
    agents_.clear();
    server_.Kill(SIGTERM);
    if (HasFailure()) {
      if (!last_cli_error_.empty()) {
        std::cerr << "last failed CLI call: " << last_cli_error_ << "\n";
      }
      std::cerr << "server log:\n" << ReadFile(dir_ + "/server.log") << "\n";
    }
    std::filesystem::remove_all(dir_);
  }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string ca() const { return tls_ + "/ca/ca.crt"; }
  // A CLI call trusting the cluster CA.
  CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--server", server(), "--ca", ca()});
    return Cli(args);
  }
  void StartAgent(const std::string& name, const std::string& tls_dir) {
    agents_[name] = std::make_unique<Proc>(
        std::vector<std::string>{"agent", "--server", server(), "--name", name, "--gpus", "2x16GiB",
                                 "--simulate", "--data-dir", dir_ + "/" + name, "--tls-dir",
                                 tls_dir},
        dir_ + "/" + name + ".log");
  }
  bool NodeConnected(const std::string& name) {
    CliResult r = Run({"nodes", "--json"});
    if (r.code != 0) return false;
    for (const Json& n : Json::parse(r.out)) {
      if (n["name"] == name && n["connected"] == true) return true;
    }
    return false;
  }
  // An empty object when `show` failed; its exit code and stderr are printed if the test
  // fails (a CLI that failed otherwise shows up only as a missing field).
  Json Task(uint64_t id) {
    CliResult r = Run({"show", std::to_string(id), "--json"});
    if (r.code == 0) return Json::parse(r.out);
    last_cli_error_ =
        "show " + std::to_string(id) + ": exit " + std::to_string(r.code) + ": " + r.err;
    return Json::object();
  }
  bool WaitState(uint64_t id, const std::string& state) {
    return PollUntil([&] { return Task(id).value("state", "") == state; }, kDeadline);
  }

  std::string extra_config_;
  std::string last_cli_error_;
  std::string dir_, tls_;
  int port_ = 0, http_port_ = 0;
  Proc server_;
  std::map<std::string, std::unique_ptr<Proc>> agents_;
};

TEST_F(TlsClusterTest, PlaintextClientFailsCleanlyAndTheCaMakesItWork) {
  // No --ca: a clear failure, exit 3, saying what to do; not a hang.
  const auto t0 = std::chrono::steady_clock::now();
  CliResult plain = Cli({"nodes", "--server", server()});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_EQ(plain.code, 3) << plain.err;
  EXPECT_NE(plain.err.find("GPUSCHED_CA"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("--ca"), std::string::npos) << plain.err;

  // An agent without TLS is told what may be wrong (it said "Socket closed", nothing more).
  Proc plain_agent({"agent", "--server", server(), "--name", "plain", "--gpus", "1x16GiB",
                    "--simulate", "--data-dir", dir_ + "/plain"},
                   dir_ + "/plain.log");
  EXPECT_TRUE(PollUntil(
      [&] {
        return ReadFile(dir_ + "/plain.log").find("start this agent with --tls-dir too") !=
               std::string::npos;
      },
      kDeadline))
      << ReadFile(dir_ + "/plain.log");
  plain_agent.Kill(SIGTERM);

  // With the CA (flag or environment) the whole path works: an agent over mutual TLS runs
  // a task, its logs come back.
  StartAgent("n1", tls_);
  ASSERT_TRUE(PollUntil([&] { return NodeConnected("n1"); }, kDeadline))
      << ReadFile(dir_ + "/n1.log");
  CliResult sub = Run({"submit", "--", "sh", "-c", "echo over-tls"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const uint64_t id = std::stoull(sub.out);
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  EXPECT_EQ(Task(id)["node"], "n1");
  CliResult logs = Run({"logs", std::to_string(id)});
  EXPECT_NE(logs.out.find("over-tls"), std::string::npos) << logs.out << logs.err;
  // The agent's log service (its --listen address) is mutual TLS as well, for the servers
  // only: neither a plaintext client nor another agent's certificate reads a log there.
  std::string agent_address;
  for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
    if (n["name"] == "n1") agent_address = n.value("address", "");
  }
  ASSERT_FALSE(agent_address.empty());
  v1::ReadLogRequest read;
  read.set_id(id);
  read.set_attempt(1);
  auto read_with = [&](const rpc::ClientTls* tls) {
    auto stub = v1::Agent::NewStub(rpc::MakeChannel(agent_address, false, tls));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::ReadLogResponse out;
    return stub->ReadLog(&ctx, read, &out);
  };
  EXPECT_EQ(read_with(nullptr).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto other_agent = rpc::LoadAgentTls(tls_, "n2");
  ASSERT_TRUE(other_agent.ok()) << other_agent.status().ToString();
  other_agent->server_name = "n1";
  const grpc::Status by_agent = read_with(&*other_agent);
  EXPECT_EQ(by_agent.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << by_agent.error_message();
  auto as_server = rpc::LoadClientTls(ca(), tls_ + "/server/log-reader.crt",
                                      tls_ + "/server/log-reader.key");
  ASSERT_TRUE(as_server.ok());
  as_server->server_name = "n1";
  EXPECT_TRUE(read_with(&*as_server).ok());

  // A server list (an HA control plane): the first cannot be reached, the client moves on
  // to the next over TLS.
  CliResult listed = Cli({"nodes", "--server", "127.0.0.1:" + std::to_string(FreePort()) + "," +
                          server(), "--ca", ca()});
  EXPECT_EQ(listed.code, 0) << listed.err;
  setenv("GPUSCHED_CA", ca().c_str(), 1);
  CliResult env = Cli({"nodes", "--server", server()});
  unsetenv("GPUSCHED_CA");
  EXPECT_EQ(env.code, 0) << env.err;

  // HTTP is HTTPS now, with the same certificate; plaintext HTTP gets nothing.
  httplib::SSLClient https("127.0.0.1", http_port_);
  https.set_ca_cert_path(ca().c_str());
  https.enable_server_certificate_verification(true);
  auto res = https.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "");
}

TEST_F(TlsClusterTest, TlsClientAgainstPlaintextServerFailsCleanly) {
  const int plain_port = FreePort();
  Proc plain({"server", "--listen", "127.0.0.1:" + std::to_string(plain_port), "--http", "",
              "--data-dir", dir_ + "/plain"},
             dir_ + "/plain.log");
  const std::string addr = "127.0.0.1:" + std::to_string(plain_port);
  ASSERT_TRUE(PollUntil([&] { return Cli({"nodes", "--server", addr}).code == 0; }, kDeadline));
  CliResult r = Cli({"nodes", "--server", addr, "--ca", ca()});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("TLS with the server at " + addr + " failed"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("needs no --ca"), std::string::npos) << r.err;
  // Our line alone: gRPC's own line about the same handshake came first (rpc/grpc_log.h).
  EXPECT_EQ(r.err.find("gRPC"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  plain.Kill(SIGTERM);
}

// Issue 35, finding 8: the server's certificate once carried clientAuth and the names
// localhost and 127.0.0.1, and registered as node "localhost". Now it is no client, and the
// servers' client identity (the log reader) names only gpusched-server, which no node may be.
TEST_F(TlsClusterTest, Issue35_TheServersCertificatesCannotRegisterAsANode) {
  const std::string as_server = dir_ + "/as-server";
  std::filesystem::create_directories(as_server);
  std::filesystem::copy_file(ca(), as_server + "/ca.crt");
  std::filesystem::copy_file(tls_ + "/server/server.crt", as_server + "/localhost.crt");
  std::filesystem::copy_file(tls_ + "/server/server.key", as_server + "/localhost.key");
  StartAgent("localhost", as_server);
  const std::string as_reader = dir_ + "/as-reader";
  std::filesystem::create_directories(as_reader);
  std::filesystem::copy_file(ca(), as_reader + "/ca.crt");
  std::filesystem::copy_file(tls_ + "/server/log-reader.crt", as_reader + "/n9.crt");
  std::filesystem::copy_file(tls_ + "/server/log-reader.key", as_reader + "/n9.key");
  StartAgent("n9", as_reader);
  // Control: a real node's bundle registers (so the two above had the time to).
  StartAgent("n1", tls_ + "/nodes/n1");
  ASSERT_TRUE(PollUntil([&] { return NodeConnected("n1"); }, kDeadline));
  std::this_thread::sleep_for(2s);  // several reconnect attempts
  CliResult nodes = Run({"nodes", "--json"});
  ASSERT_EQ(nodes.code, 0) << nodes.err;
  ASSERT_EQ(Json::parse(nodes.out).size(), 1u) << nodes.out;
  EXPECT_EQ(Json::parse(nodes.out)[0]["name"], "n1") << nodes.out;
}

TEST_F(TlsClusterTest, AgentWithAnotherNodesCertificateIsRefused) {
  // tls2/n1.crt is in truth n2's certificate (CN=n2): an agent claiming to be n1 with it.
  const std::string impostor = dir_ + "/tls2";
  std::filesystem::create_directories(impostor);
  std::filesystem::copy_file(ca(), impostor + "/ca.crt");
  std::filesystem::copy_file(tls_ + "/nodes/n2/n2.crt", impostor + "/n1.crt");
  std::filesystem::copy_file(tls_ + "/nodes/n2/n2.key", impostor + "/n1.key");
  StartAgent("n1", impostor);
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string log = ReadFile(dir_ + "/server.log");
        return log.find("refused agent \"n1\"") != std::string::npos;
      },
      kDeadline))
      << ReadFile(dir_ + "/server.log");
  // Each name once: the CN and the DNS SAN are both n2 (it said "names n2, n2").
  EXPECT_NE(ReadFile(dir_ + "/server.log").find("its certificate names n2\n"), std::string::npos)
      << ReadFile(dir_ + "/server.log");
  std::this_thread::sleep_for(1s);  // several reconnect attempts
  CliResult nodes = Run({"nodes", "--json"});
  ASSERT_EQ(nodes.code, 0) << nodes.err;
  EXPECT_TRUE(Json::parse(nodes.out).empty()) << nodes.out;
  EXPECT_NE(ReadFile(dir_ + "/n1.log").find("may only register as the node its certificate"),
            std::string::npos)
      << ReadFile(dir_ + "/n1.log");

  // TLS without a client certificate (as the CLI connects) may not use the agent link.
  auto tls = rpc::LoadClientTls(ca());
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  auto link = v1::AgentLink::NewStub(rpc::MakeChannel(server(), false, &*tls));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto stream = link->Connect(&ctx);
  v1::AgentMessage reg;
  reg.mutable_register_()->set_name("n1");
  reg.mutable_register_()->set_address("127.0.0.1:1");
  stream->Write(reg);
  stream->WritesDone();
  v1::ServerMessage ignored;
  while (stream->Read(&ignored)) {
  }
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  // The genuine n2 is welcome.
  StartAgent("n2", tls_);
  EXPECT_TRUE(PollUntil([&] { return NodeConnected("n2"); }, kDeadline))
      << ReadFile(dir_ + "/n2.log");
  EXPECT_FALSE(NodeConnected("n1"));
}

// A highly available control plane over TLS: clients given the standby first follow its
// "leader is ADDR" to the leader, agents too, every hop over TLS.
// Issue 38: etcd too is spoken to over TLS, presenting a client certificate that etcd's
// --client-cert-auth checks; a server without one never reaches it.
TEST(TlsHaTest, Issue38_ClientsAndAgentsFollowTheLeaderOverTlsAndEtcdIsTlsWithClientCerts) {
  if (!store::LocalEtcd::Installed()) GTEST_SKIP() << "etcd is not installed";
  const std::string dir = TempDir("ha");
  ASSERT_EQ(Cli({"certs", "init", dir + "/tls", "--agent", "n1", "--agent", "gs-etcd"}).code, 0);
  const std::string ca = dir + "/tls/ca/ca.crt";
  const std::string client = dir + "/tls/nodes/gs-etcd/gs-etcd";
  store::LocalEtcd::Options eo;
  eo.dir = dir + "/etcd";
  eo.members = 1;
  eo.cert_file = dir + "/tls/server/server.crt";
  eo.key_file = dir + "/tls/server/server.key";
  eo.client_ca_file = ca;
  auto tls = store::LoadEtcdTls(ca, client + ".crt", client + ".key");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  eo.client.tls = *tls;
  auto etcd = store::LocalEtcd::Start(eo);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  ASSERT_EQ((*etcd)->client_urls().rfind("https://", 0), 0u) << (*etcd)->client_urls();
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<Proc>> servers;
  WriteFile(dir + "/server.yaml", "node_heartbeat: 250ms\nnode_timeout: 10s\n");
  auto server_args = [&](int i, bool with_cert) {
    std::vector<std::string> a = {"server", "--store", "etcd", "--etcd", (*etcd)->client_urls(),
                                  "--listen", addrs[i], "--http",
                                  "127.0.0.1:" + std::to_string(FreePort()), "--lease-ttl", "2s",
                                  "--config", dir + "/server.yaml", "--tls-dir", dir + "/tls",
                                  "--etcd-ca", ca};
    if (with_cert) {
      a.insert(a.end(), {"--etcd-cert", client + ".crt", "--etcd-key", client + ".key"});
    }
    return a;
  };
  for (int i = 0; i < 3; ++i) {
    addrs.push_back("127.0.0.1:" + std::to_string(FreePort()));
    servers.push_back(std::make_unique<Proc>(server_args(i, /*with_cert=*/i < 2),
                                             dir + "/server" + std::to_string(i) + ".log"));
  }
  // The third has no client certificate: etcd refuses its handshake and it never leads.
  ASSERT_TRUE(PollUntil(
      [&] {
        CliResult r = Cli({"status", "--json", "--server", addrs[2], "--ca", ca});
        return r.out.find("cannot reach etcd") != std::string::npos;
      },
      kDeadline))
      << Cli({"status", "--json", "--server", addrs[2], "--ca", ca}).out << servers[2]->Log();
  servers[2]->Kill(SIGTERM);
  servers.pop_back();
  addrs.pop_back();
  int leader = -1;
  ASSERT_TRUE(PollUntil(
      [&] {
        for (int i = 0; i < 2; ++i) {
          CliResult r = Cli({"status", "--json", "--server", addrs[i], "--ca", ca});
          if (r.code == 0 && r.out.find("\"role\":\"leader\"") != std::string::npos) {
            leader = i;
            return true;
          }
        }
        return false;
      },
      kDeadline))
      << servers[0]->Log() << servers[1]->Log();
  const std::string standby_first = addrs[1 - leader] + "," + addrs[leader];
  Proc agent({"agent", "--server", standby_first, "--name", "n1", "--gpus", "1x16GiB",
              "--simulate", "--data-dir", dir + "/n1", "--tls-dir", dir + "/tls"},
             dir + "/n1.log");
  ASSERT_TRUE(PollUntil(
      [&] {
        CliResult r = Cli({"nodes", "--json", "--server", standby_first, "--ca", ca});
        return r.code == 0 && r.out.find("\"connected\":true") != std::string::npos;
      },
      kDeadline))
      << agent.Log();
  CliResult sub = Cli({"submit", "--server", standby_first, "--ca", ca, "--", "true"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  EXPECT_TRUE(PollUntil(
      [&] {
        CliResult r = Cli({"show", std::to_string(std::stoull(sub.out)), "--json", "--server",
                           standby_first, "--ca", ca});
        return r.code == 0 && Json::parse(r.out).value("state", "") == "succeeded";
      },
      kDeadline));
  agent.Kill(SIGTERM);
  for (auto& s : servers) s->Kill(SIGTERM);
  etcd->reset();
  std::filesystem::remove_all(dir);
}

// Issue 38: etcd holds every task's environment and the tokens' hashes.
TEST(UnsafeStartTest, Issue38_PlaintextEtcdOffLoopbackIsRefusedUnlessInsecure) {
  CliResult r = Cli({"server", "--store", "etcd", "--etcd", "http://10.255.0.1:2379", "--listen",
                     "127.0.0.1:0", "--http", "127.0.0.1:0"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("etcd: \"http://10.255.0.1:2379\" is plaintext off loopback"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--etcd-ca"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--insecure"), std::string::npos) << r.err;
  r = Cli({"server", "--store", "etcd", "--etcd", "https://10.255.0.1:2379", "--etcd-cert",
           "/nonexistent.crt", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("etcd_key: missing"), std::string::npos) << r.err;
}

TEST(UnsafeStartTest, NonLoopbackWithoutTlsIsRefusedUnlessInsecure) {
  const std::string dir = TempDir("unsafe");
  CliResult r = Cli({"server", "--listen", "0.0.0.0:0", "--http", "127.0.0.1:0", "--data-dir",
                     dir + "/a"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("listen 0.0.0.0:0 is reachable from other machines"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("certs init"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--tls-dir"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--insecure"), std::string::npos) << r.err;
  // HTTP off loopback alone is refused as well.
  r = Cli({"server", "--listen", "127.0.0.1:0", "--http", "0.0.0.0:0", "--data-dir",
           dir + "/b"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("http 0.0.0.0:0"), std::string::npos) << r.err;

  // --insecure: it starts, and says loudly what that means.
  Proc insecure({"server", "--listen", "0.0.0.0:0", "--http", "127.0.0.1:0", "--data-dir",
                 dir + "/c", "--insecure"},
                dir + "/insecure.log");
  EXPECT_TRUE(PollUntil(
      [&] { return ReadFile(dir + "/insecure.log").find("listening on") != std::string::npos; },
      kDeadline))
      << ReadFile(dir + "/insecure.log");
  EXPECT_NE(ReadFile(dir + "/insecure.log").find("WARNING: --insecure"), std::string::npos);
  insecure.Kill(SIGTERM);

  // With TLS it starts off loopback without --insecure, and without the warning.
  ASSERT_EQ(Cli({"certs", "init", dir + "/tls"}).code, 0);
  Proc tls({"server", "--listen", "0.0.0.0:0", "--http", "127.0.0.1:0", "--data-dir",
            dir + "/d", "--tls-dir", dir + "/tls"},
           dir + "/tls.log");
  EXPECT_TRUE(PollUntil(
      [&] { return ReadFile(dir + "/tls.log").find("listening on") != std::string::npos; },
      kDeadline))
      << ReadFile(dir + "/tls.log");
  EXPECT_EQ(ReadFile(dir + "/tls.log").find("WARNING"), std::string::npos);
  tls.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpusched::testing
