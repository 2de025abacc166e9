// Issue 36 (and 35's data directories): the server's doors, tried as an attacker would
// against the real binaries. HTTP: a foreign Host or Origin (DNS rebinding), a huge
// unauthenticated body, slow connections, too many streams; gRPC: too many Watch streams;
// the CLI: a token in cleartext off loopback; the data directories: modes, a planted
// admin-token, a planted /tmp agent directory, a foreign-owned or group-writable --data-dir.
// The tests that create a Unix user need root (skipped otherwise).

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

namespace v1 = ::gpusched::v1;

const std::string kWellFormedUnknownToken = "gst_0123456789abcdef_" + std::string(64, 'a');

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until the peer closes (or 10 s pass); returns the HTTP status and the text.
HttpResult ReadAnswer(int fd, bool until_close = true) {
  std::string answer;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    answer.append(buf, static_cast<size_t>(n));
    if (!until_close && answer.find("\r\n\r\n") != std::string::npos) break;
  }
  HttpResult r;
  if (answer.rfind("HTTP/1.", 0) == 0 && answer.size() > 12) r.status = std::atoi(answer.c_str() + 9);
  r.body = answer;
  return r;
}

// One raw request with exactly the headers given (the harness adds its own Host).
HttpResult Raw(int port, const std::string& head, const std::string& body = "") {
  const int fd = Connect(port);
  if (fd < 0) return {};
  const std::string req = head + "Connection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  HttpResult r = ReadAnswer(fd);
  close(fd);
  return r;
}

// One request on a connection the test keeps open (HTTP/1.1 keep-alive, as curl sends it):
// `head` ends with its last header line; nothing is added. Returns the first answer, read
// up to the end of its body (Content-Length), without waiting for the connection to close.
HttpResult OneAnswer(int port, const std::string& head, const std::string& body = "") {
  const int fd = Connect(port);
  if (fd < 0) return {};
  const std::string req = head + "\r\n" + body;
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string answer;
  size_t end = std::string::npos, length = 0;
  char buf[4096];
  while (end == std::string::npos || answer.size() < end + 4 + length) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    end = answer.find("\r\n\r\n");
    const size_t at = answer.find("Content-Length: ");
    length = end != std::string::npos && at < end ? std::stoul(answer.substr(at + 16)) : 0;
  }
  close(fd);
  HttpResult r;
  if (answer.rfind("HTTP/1.", 0) == 0 && answer.size() > 12) r.status = std::atoi(answer.c_str() + 9);
  if (end != std::string::npos) r.body = answer.substr(end + 4, length);
  return r;
}

// The {"error": {...}} of an answer's body, or {} when it has none.
Json ErrorOf(const HttpResult& r) {
  const Json j = Json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : Json::object();
}

int64_t PeakRssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

std::string OwnerOf(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return "(none)";
  return std::to_string(st.st_uid);
}

// ---------------------------------------------------------------- HTTP, no authentication

class DoorsTest : public ClusterTest {
 protected:
  void SetUp() override {
    // `gpusched dev`'s situation: loopback, authentication off, anyone local may submit.
    ClusterTest::SetUp();
  }
  std::string Post(const std::string& host, const std::string& origin) {
    std::string head = "POST /api/v1/tasks HTTP/1.1\r\nHost: " + host +
                       "\r\nContent-Type: application/json\r\n";
    if (!origin.empty()) head += "Origin: " + origin + "\r\n";
    HttpResult r = Raw(http_port_, head, R"({"command": ["true"]})");
    return std::to_string(r.status) + " " + r.body;
  }
};

TEST_F(DoorsTest, Issue36_ForeignHostOrOriginIsRefusedAndCreatesNoTask) {
  const std::string port = std::to_string(http_port_);
  // A page at attacker.example whose name now resolves to 127.0.0.1.
  std::string r = Post("attacker.example:" + port, "http://attacker.example:" + port);
  EXPECT_EQ(r.rfind("403 ", 0), 0u) << r;
  EXPECT_NE(r.find("Host: \\\"attacker.example:" + port), std::string::npos) << r;
  // The same request naming the right Host but sent from the attacker's page.
  r = Post("127.0.0.1:" + port, "http://attacker.example:" + port);
  EXPECT_EQ(r.rfind("403 ", 0), 0u) << r;
  EXPECT_NE(r.find("Origin"), std::string::npos) << r;
  // Reading through a rebinding page is refused as well.
  HttpResult get = Raw(http_port_, "GET /api/v1/tasks HTTP/1.1\r\nHost: attacker.example\r\n");
  EXPECT_EQ(get.status, 403) << get.body;
  EXPECT_TRUE(Tasks().empty());
  // The server's own names, its own pages' Origin, and a program (no Origin) pass.
  EXPECT_EQ(Post("localhost:" + port, "http://localhost:" + port).rfind("201 ", 0), 0u);
  EXPECT_EQ(Post("127.0.0.1:" + port, "").rfind("201 ", 0), 0u);
  EXPECT_EQ(Post("[::1]:" + port, "").rfind("201 ", 0), 0u);
  // The right name on another port is another origin.
  EXPECT_EQ(Post("127.0.0.1:1", "").rfind("403 ", 0), 0u);
  EXPECT_EQ(Tasks().size(), 3u);
}

// Issue 41: `curl -X POST .../tasks/ID/cancel` (no body, no Content-Type, a keep-alive
// connection) cancels at once and answers the task; a page of another site still cannot
// (its Origin is refused first), and a body must still be JSON.
TEST_F(DoorsTest, Issue41_CancelNeedsNoBodyAndAnswersTheTask) {
  const HttpResult submitted = HttpRequest(http_port_, "POST", "/api/v1/tasks",
                                           {"Content-Type: application/json"},
                                           R"({"command": ["true"], "keep_pending": true})");
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const std::string id = std::to_string(Json::parse(submitted.body)["id"].get<uint64_t>());
  const std::string cancel = "POST /api/v1/tasks/" + id + "/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  HttpResult r = OneAnswer(http_port_, cancel + "Origin: http://attacker.example\r\n");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(ErrorOf(r).value("message", "").find("Origin"), std::string::npos) << r.body;
  r = OneAnswer(http_port_, cancel + "Content-Type: text/plain\r\nContent-Length: 2\r\n", "{}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).value("field", ""), "Content-Type") << r.body;
  EXPECT_EQ(Task(std::stoull(id))["state"], "pending");
  r = OneAnswer(http_port_, cancel);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["state"], "cancelled") << r.body;
  EXPECT_EQ(Json::parse(r.body)["id"].get<uint64_t>(), std::stoull(id));
}

// Issue 41: the REST body takes the job file's fields: time limit, working directory,
// priority, preemption, node rules as objects, a shell command string.
TEST_F(DoorsTest, Issue41_RestSubmitTakesTheJobFilesFields) {
  const HttpResult r = HttpRequest(
      http_port_, "POST", "/api/v1/tasks", {"Content-Type: application/json"},
      R"({"command": "echo hi", "time": "2h", "workdir": "/tmp", "priority": "high",
          "preemptible": false, "grace": "45s", "signal": "USR1", "keep_pending": true,
          "tolerations": [{"key": "spot", "operator": "Exists"}],
          "node_selector": {"zone": "a"}})");
  ASSERT_EQ(r.status, 201) << r.body;
  const HttpResult shown = HttpRequest(http_port_, "GET",
                                       Json::parse(r.body)["url"].get<std::string>());
  const Json t = Json::parse(shown.body, nullptr, false);
  ASSERT_TRUE(t.contains("request")) << shown.body;
  EXPECT_EQ(t["command"], Json::parse(R"(["/bin/sh", "-c", "echo hi"])")) << t.dump();
  EXPECT_EQ(t["workdir"], "/tmp") << t.dump();
  const Json& q = t["request"];
  EXPECT_EQ(q["time_limit_ms"], 7'200'000) << q.dump();
  EXPECT_EQ(q["priority_class"], "high") << q.dump();
  EXPECT_EQ(q["preemptible"], false) << q.dump();
  EXPECT_EQ(q["grace_ms"], 45'000) << q.dump();
  EXPECT_EQ(q["signal"], SIGUSR1) << q.dump();
  EXPECT_EQ(q["node_selector"], Json::parse(R"({"zone": "a"})")) << q.dump();
  EXPECT_EQ(q["tolerations"].size(), 1u) << q.dump();
  const HttpResult relative = HttpRequest(http_port_, "POST", "/api/v1/tasks",
                                          {"Content-Type: application/json"},
                                          R"({"command": ["true"], "workdir": "runs"})");
  EXPECT_EQ(relative.status, 400) << relative.body;
  EXPECT_EQ(ErrorOf(relative).value("field", ""), "workdir") << relative.body;
}

// Issue 41: httplib's own refusals answer the API's JSON error, not an empty body: a
// request line that is not HTTP, a path no route serves, a chunked body past http_max_body.
TEST_F(DoorsTest, Issue41_EveryErrorHasAJsonBody) {
  HttpResult r = OneAnswer(http_port_, "NOT-HTTP\r\n");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).value("code", ""), "invalid_argument") << r.body;
  r = OneAnswer(http_port_, "POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(ErrorOf(r).value("field", ""), "path") << r.body;
  r = OneAnswer(http_port_, "POST /api/v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(ErrorOf(r).value("code", ""), "not_found") << r.body;
  // 1.25 MiB in one chunk: past the default http_max_body (1 MiB) while it is read.
  const int fd = Connect(http_port_);
  ASSERT_GE(fd, 0);
  const size_t size = (5u << 20) / 4;
  char hex[32];
  std::snprintf(hex, sizeof hex, "%zx", size);
  const std::string req = "POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          "application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                          std::string(hex) + "\r\n" + std::string(size, ' ') + "\r\n0\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    const ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server stopped reading
    sent += static_cast<size_t>(n);
  }
  r = ReadAnswer(fd);
  close(fd);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("http_max_body"), std::string::npos) << r.body;
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "ok\n");
}

TEST_F(DoorsTest, Issue36_SixtySlowConnectionsDoNotStallHealthz) {
  std::vector<int> slow;
  for (int i = 0; i < 60; ++i) {
    const int fd = Connect(http_port_);
    ASSERT_GE(fd, 0);
    const std::string part = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    (void)!send(fd, part.data(), part.size(), MSG_NOSIGNAL);  // and never the end of it
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "ok\n");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 1500ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  for (int fd : slow) close(fd);
}

class SlowHeaderTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    server_.Kill(SIGTERM);
    WriteFile(path("server.yaml"), ReadFile(path("server.yaml")) + "http_header_timeout: 2s\n");
    StartServer();
  }
};

TEST_F(SlowHeaderTest, Issue36_AHeadTrickledByteByByteIsCutAtTheHeaderDeadline) {
  const int fd = Connect(http_port_);
  ASSERT_GE(fd, 0);
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " +
                           std::string(200, 'a');
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (char c : head) {
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    char b;
    if (recv(fd, &b, 1, MSG_DONTWAIT) == 0) {
      closed = true;
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_LT(took, 5s);
}

// ---------------------------------------------------------------- HTTP and gRPC with tokens

class DoorsAuthTest : public AuthClusterTest {
 protected:
  void SetUp() override {
    AuthClusterTest::SetUp();
    if (HasFatalFailure()) return;
    server_.Kill(SIGTERM);
    WriteFile(path("server.yaml"), ReadFile(path("server.yaml")) +
                                       "stream_limit: 3\nstream_limit_per_user: 2\n");
    StartServer();
  }
  // An open REST event stream of `token` (the socket), after its first answer's head.
  int OpenEvents(const std::string& token, HttpResult* answer) {
    const int fd = Connect(http_port_);
    const std::string req = "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Authorization: Bearer " + token + "\r\n\r\n";
    (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    *answer = ReadAnswer(fd, false);
    return fd;
  }
};

// The default limits (no config keys), so the same test runs against an older server.
TEST_F(AuthClusterTest, Issue36_AHugeUnauthenticatedPostIsRefusedUnread) {
  const pid_t pid = server_.pid();
  ASSERT_GT(pid, 0);
  const int64_t before = PeakRssKiB(pid);
  const int fd = Connect(http_port_);
  ASSERT_GE(fd, 0);
  const size_t total = 400u << 20;
  const std::string head = "POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Content-Type: application/json\r\nContent-Length: " +
                           std::to_string(total) + "\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), ssize_t(head.size()));
  const std::string chunk(1 << 20, 'a');
  size_t sent = 0;
  while (sent < total) {
    const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed: what it did not read it never will
    sent += static_cast<size_t>(n);
  }
  HttpResult r = ReadAnswer(fd);
  close(fd);
  const int64_t after = PeakRssKiB(pid);
  std::cout << "server peak RSS " << before << " KiB before, " << after << " KiB after a "
            << (total >> 20) << " MiB unauthenticated POST (" << (sent >> 20) << " MiB sent)\n";
  EXPECT_LT(after - before, 64 * 1024) << "peak RSS " << before << " -> " << after << " KiB";
  EXPECT_LT(sent, total) << "the server read the whole body";
  if (r.status != 0) {
    EXPECT_EQ(r.status, 401) << r.body;
  }
  // A body over http_max_body from an authenticated caller: 413, also unread.
  const HttpResult big = Raw(http_port_,
                             "POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                             "application/json\r\nAuthorization: Bearer " + admin_ + "\r\n",
                             std::string((1 << 20) + 1, ' '));
  EXPECT_EQ(big.status, 413) << big.body;
  EXPECT_NE(big.body.find("http_max_body"), std::string::npos) << big.body;
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "ok\n");
}

// Issue 41: the order of a write's checks: the caller (401), then the task and whether the
// caller may touch it (404, 403), then the content (400). Bob's cancel of Alice's task is
// 403 whatever its Content-Type; Alice's needs no body.
TEST_F(AuthClusterTest, Issue41_OwnershipIsCheckedBeforeTheContent) {
  const std::string alice = CreateToken("alice", "ml"), bob = CreateToken("bob", "ml");
  const HttpResult submitted = HttpRequest(
      http_port_, "POST", "/api/v1/tasks",
      {"Content-Type: application/json", "Authorization: Bearer " + alice},
      R"({"command": ["true"], "keep_pending": true})");
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const std::string id = std::to_string(Json::parse(submitted.body)["id"].get<uint64_t>());
  const std::string url = "/api/v1/tasks/" + id + "/cancel";
  auto cancel = [&](const std::string& token, const std::string& path) {
    return HttpRequest(http_port_, "POST", path,
                       {"Content-Type: text/plain", "Authorization: Bearer " + token}, "x");
  };
  HttpResult r = cancel(kWellFormedUnknownToken, url);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(ErrorOf(r).value("code", ""), "unauthenticated") << r.body;
  r = cancel(bob, url);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(ErrorOf(r).value("code", ""), "permission_denied") << r.body;
  r = cancel(bob, "/api/v1/tasks/999999/cancel");
  EXPECT_EQ(r.status, 404) << r.body;
  r = cancel(alice, url);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).value("field", ""), "Content-Type") << r.body;
  r = OneAnswer(http_port_, "POST " + url + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Authorization: Bearer " + alice + "\r\n");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body, nullptr, false).value("state", ""), "cancelled") << r.body;
}

TEST_F(DoorsAuthTest, Issue36_StreamsAreCappedPerUserAndInTotal) {
  const std::string alice = CreateToken("alice", "ml"), bob = CreateToken("bob", "ml");
  HttpResult a1, a2, a3;
  const int s1 = OpenEvents(alice, &a1), s2 = OpenEvents(alice, &a2);
  EXPECT_EQ(a1.status, 200) << a1.body;
  EXPECT_EQ(a2.status, 200) << a2.body;
  const int s3 = OpenEvents(alice, &a3);
  EXPECT_EQ(a3.status, 429) << a3.body;
  HttpResult rest = ReadAnswer(s3);
  EXPECT_NE((a3.body + rest.body).find("stream_limit_per_user"), std::string::npos)
      << a3.body << rest.body;
  // gRPC Watch counts against the same limits: alice is at hers.
  auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
  auto watch = [&](const std::string& token, grpc::ClientContext& ctx) {
    ctx.AddMetadata("authorization", "Bearer " + token);
    return stub->Watch(&ctx, v1::WatchRequest());
  };
  // A Watch that the server ends at once: its status.
  auto refused_watch = [&](const std::string& token) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto reader = watch(token, ctx);
    v1::Task t;
    while (reader->Read(&t)) {
    }
    return reader->Finish();
  };
  grpc::Status st = refused_watch(alice);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("stream_limit_per_user"), std::string::npos)
      << st.error_message();
  // Bob's first Watch fits (3 open in all), his second finds the server at stream_limit.
  grpc::ClientContext open_ctx;
  auto open = watch(bob, open_ctx);
  std::this_thread::sleep_for(500ms);  // the server has taken its slot
  st = refused_watch(bob);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("stream_limit allows"), std::string::npos)
      << st.error_message();
  open_ctx.TryCancel();
  close(s1);
  close(s2);
  close(s3);
  // Closed streams give their slots back.
  EXPECT_TRUE(PollUntil([&] {
    HttpResult again;
    const int fd = OpenEvents(alice, &again);
    close(fd);
    return again.status == 200;
  }, kDeadline));
}

// ---------------------------------------------------------------- the CLI

// A non-loopback IPv4 address of this machine, or "".
std::string LocalInterfaceAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::string(buf).rfind("127.", 0) != 0) found = buf;
  }
  freeifaddrs(all);
  return found;
}

TEST(CliTokenTest, Issue36_TheCliRefusesToSendATokenInCleartextOffLoopback) {
  // 192.0.2.1 (TEST-NET-1) answers nothing: a CLI that tried to connect would wait its
  // deadline; the refusal comes first.
  const auto start = std::chrono::steady_clock::now();
  CliResult r = Cli({"ls", "--server", "192.0.2.1:7070"},
                    {{"GPUSCHED_TOKEN", "gst_0123456789abcdef_" + std::string(64, 'a')},
                     {"GPUSCHED_CA", ""}});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("cleartext"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ca"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GPUSCHED_CA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--insecure"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(AuthClusterTest, Issue36_InsecurePassesTheCleartextCheckToALocalInterface) {
  const std::string address = LocalInterfaceAddress();
  if (address.empty()) GTEST_SKIP() << "no non-loopback interface";
  server_.Kill(SIGTERM);
  server_flags_ = {"--auth", "token", "--insecure"};
  const int grpc_port = FreePort();
  server_ = Proc({"server", "--listen", "0.0.0.0:" + std::to_string(grpc_port), "--http", "",
                  "--data-dir", path("data"), "--auth", "token", "--insecure"},
                 path("server2.log"));
  const std::string there = address + ":" + std::to_string(grpc_port);
  ASSERT_TRUE(PollUntil([&] { return Cli({"--insecure", "nodes", "--server", there}).code == 0; },
                        kDeadline))
      << ReadFile(path("server2.log"));
  CliResult refused = Cli({"nodes", "--server", there});
  EXPECT_EQ(refused.code, 4) << refused.err;
  EXPECT_NE(refused.err.find("cleartext"), std::string::npos) << refused.err;
  CliResult after = Cli({"nodes", "--insecure", "--server", there});
  EXPECT_EQ(after.code, 0) << after.err;
}

// ---------------------------------------------------------------- data directories

// A system user for the test, removed afterwards; skips without root.
class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (creates a user)";
    user_ = "gpsd" + std::to_string(getpid() % 100000);
    if (std::system(("useradd --system --no-create-home --shell /bin/sh " + user_ +
                     " >/dev/null 2>&1").c_str()) != 0) {
      GTEST_SKIP() << "useradd failed";
    }
    passwd* pw = getpwnam(user_.c_str());
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    char tmpl[] = "/tmp/gpusched_datadir_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    server_.Kill(SIGTERM);
    agent_.Kill(SIGTERM);
    if (!user_.empty()) (void)!std::system(("userdel " + user_ + " >/dev/null 2>&1").c_str());
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    for (const std::string& d : cleanup_) std::filesystem::remove_all(d);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Whether `user_` can open `file` for reading (a child that drops to the user tries).
  bool UserCanRead(const std::string& file) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (setgid(gid_) != 0 || setuid(uid_) != 0) _exit(2);
      _exit(open(file.c_str(), O_RDONLY) >= 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  // Runs `gpusched ARGS` for at most 15 s; exit status and output.
  CliResult RunFor15s(const std::string& args) {
    const std::string out = path("run.out");
    const int rc = std::system(("timeout 15 " GPUSCHED_BIN " " + args + " >" + out + " 2>&1")
                                   .c_str());
    CliResult r;
    r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.err = ReadFile(out);
    return r;
  }
  std::string StartServer(const std::string& data) {
    port_ = FreePort();
    const std::string address = "127.0.0.1:" + std::to_string(port_);
    // The planted-directory test runs its task as root (the agent's --run-as-self).
    WriteFile(path("server.yaml"), "allow_root_tasks: true\n");
    server_ = Proc({"server", "--listen", address, "--http", "", "--data-dir", data, "--auth",
                    "token", "--config", path("server.yaml")},
                   path("server.log"));
    return address;
  }
  // The admin token the server at `server` wrote into `data`, once the server accepts it
  // (`gpusched nodes` succeeds with it); "" when that did not happen by kDeadline.
  std::string AdminToken(const std::string& data, const std::string& server) {
    std::string admin;
    const bool accepted = PollUntil([&] {
      admin = ReadFile(data + "/admin-token");
      while (!admin.empty() && admin.back() == '\n') admin.pop_back();
      return !admin.empty() &&
             Cli({"nodes", "--server", server}, {{"GPUSCHED_TOKEN", admin}}).code == 0;
    }, kDeadline);
    return accepted ? admin : "";
  }
  std::string user_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string dir_;
  int port_ = 0;
  Proc server_, agent_;
  std::vector<std::string> cleanup_;
};

TEST_F(DataDirTest, Issue36_StateAndTokenFilesAreUnreadableToOtherUsers) {
  const std::string data = path("data");
  const std::string server = StartServer(data);
  const std::string admin = AdminToken(data, server);
  ASSERT_FALSE(admin.empty()) << ReadFile(path("server.log"));
  ASSERT_EQ(Cli({"submit", "--server", server, "--", "true"}, {{"GPUSCHED_TOKEN", admin}}).code,
            0);
  struct stat st {};
  ASSERT_EQ(stat(data.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const char* name : {"state.db", "state.db-wal", "state.db-shm", "admin-token"}) {
    const std::string file = data + "/" + name;
    // The store holds its WAL lock exclusively: there may be no -shm file.
    if (std::string(name) == "state.db-shm" && stat(file.c_str(), &st) != 0) continue;
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0077, 0u) << file << " mode " << std::oct << (st.st_mode & 0777);
    EXPECT_FALSE(UserCanRead(file)) << file;
  }
  // Even with the directory opened up, the files themselves stay the server's.
  chmod(data.c_str(), 0755);
  EXPECT_FALSE(UserCanRead(data + "/state.db"));
  EXPECT_FALSE(UserCanRead(data + "/state.db-wal"));
  chmod(data.c_str(), 0700);
}

TEST_F(DataDirTest, Issue36_APlantedAdminTokenIsReplacedByTheServersOwn) {
  const std::string data = path("data");
  ASSERT_EQ(mkdir(data.c_str(), 0700), 0);
  const std::string token = data + "/admin-token";
  WriteFile(token, "planted\n");
  ASSERT_EQ(chown(token.c_str(), uid_, gid_), 0);
  ASSERT_EQ(chmod(token.c_str(), 0644), 0);
  const std::string server = StartServer(data);
  std::string admin;
  ASSERT_TRUE(PollUntil([&] {
    admin = ReadFile(token);
    while (!admin.empty() && admin.back() == '\n') admin.pop_back();
    return admin != "planted" && !admin.empty();
  }, kDeadline)) << ReadFile(path("server.log"));
  struct stat st {};
  ASSERT_EQ(stat(token.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(UserCanRead(token));
  EXPECT_EQ(Cli({"nodes", "--server", server}, {{"GPUSCHED_TOKEN", admin}}).code, 0);
}

TEST_F(DataDirTest, Issue36_TheServerRefusesADataDirOfAnotherUser) {
  const std::string data = path("theirs");
  ASSERT_EQ(mkdir(data.c_str(), 0700), 0);
  ASSERT_EQ(chown(data.c_str(), uid_, gid_), 0);
  CliResult r = RunFor15s("server --listen 127.0.0.1:" + std::to_string(FreePort()) +
                          " --http '' --data-dir " + data);
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(data), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(user_), std::string::npos) << r.err;
  EXPECT_EQ(OwnerOf(data + "/state.db"), "(none)");
}

TEST_F(DataDirTest, Issue35_TheAgentRefusesAForeignOrGroupWritableDataDir) {
  const std::string server = "127.0.0.1:" + std::to_string(FreePort());  // never reached
  const std::string theirs = path("theirs"), shared = path("shared");
  ASSERT_EQ(mkdir(theirs.c_str(), 0700), 0);
  ASSERT_EQ(chown(theirs.c_str(), uid_, gid_), 0);
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0770), 0);
  for (const std::string& d : {theirs, shared}) {
    CliResult r = RunFor15s("agent --server " + server + " --name n1 --gpus 1x8GiB --simulate "
                            "--data-dir " + d);
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_NE(r.code, 124) << "the agent ran on " << d << ":\n" << r.err;
    EXPECT_NE(r.err.find(d), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(d == theirs ? user_ : "writable by its group"), std::string::npos)
        << r.err;
  }
}

TEST_F(DataDirTest, Issue35_APlantedTmpAgentDirectoryIsNotUsed) {
  // The attacker, before the agent first starts: /tmp/gpusched-agent-NAME of their own, with
  // the agent's subdirectories leading elsewhere.
  const std::string name = "plant" + std::to_string(getpid() % 100000);
  const std::string planted = "/tmp/gpusched-agent-" + name;
  const std::string target = path("target");
  cleanup_ = {planted, "/var/lib/gpusched/agent-" + name};
  std::filesystem::remove_all(planted);
  ASSERT_EQ(mkdir(planted.c_str(), 0777), 0);
  ASSERT_EQ(chmod(planted.c_str(), 0777), 0);
  ASSERT_EQ(mkdir(target.c_str(), 0777), 0);
  for (const char* sub : {"logs", "journal"}) {
    ASSERT_EQ(symlink(target.c_str(), (planted + "/" + sub).c_str()), 0);
  }
  ASSERT_EQ(lchown(planted.c_str(), uid_, gid_), 0);
  const std::string data = path("data");
  const std::string server = StartServer(data);
  const std::string admin = AdminToken(data, server);
  ASSERT_FALSE(admin.empty()) << ReadFile(path("server.log"));
  // The server authenticates agents (issue 35): this one presents its node's agent token.
  CliResult token =
      Cli({"token", "create", "--server", server, "--agent", name}, {{"GPUSCHED_TOKEN", admin}});
  ASSERT_EQ(token.code, 0) << token.err;
  WriteFile(path("agent.token"), token.out);
  agent_ = Proc({"agent", "--server", server, "--name", name, "--gpus", "1x8GiB", "--simulate",
                 "--run-as-self", "--token-file", path("agent.token")},
                path("agent.log"));
  ASSERT_TRUE(PollUntil([&] {
    CliResult r = Cli({"nodes", "--server", server, "--json"}, {{"GPUSCHED_TOKEN", admin}});
    return r.code == 0 && r.out.find("\"connected\":true") != std::string::npos;
  }, kDeadline)) << ReadFile(path("agent.log"));
  CliResult sub = Cli({"submit", "--server", server, "--", "sh", "-c", "echo hello"},
                      {{"GPUSCHED_TOKEN", admin}});
  ASSERT_EQ(sub.code, 0) << sub.err;
  // The task ends: the agent has used its directory (log, journal) for it.
  std::string shown;
  EXPECT_TRUE(PollUntil([&] {
    shown = Cli({"show", "--server", server, sub.out.substr(0, sub.out.find('\n')), "--json"},
                {{"GPUSCHED_TOKEN", admin}}).out;
    return shown.find("\"succeeded\"") != std::string::npos ||
           shown.find("\"failed\"") != std::string::npos;
  }, kDeadline)) << shown << ReadFile(path("agent.log"));
  EXPECT_NE(shown.find("\"succeeded\""), std::string::npos) << shown;
  EXPECT_TRUE(std::filesystem::is_empty(target))
      << "the agent wrote through the planted links; task: " << shown;
  struct stat st {};
  const std::string own = "/var/lib/gpusched/agent-" + name;
  ASSERT_EQ(lstat(own.c_str(), &st), 0) << ReadFile(path("agent.log"));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

}  // namespace
}  // namespace gpusched::testing
