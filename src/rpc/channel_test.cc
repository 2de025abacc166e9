#include "rpc/channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::rpc {
namespace {

TEST(ChannelTargetTest, AnIpv4LiteralSkipsTheResolver) {
  EXPECT_EQ(ChannelTarget("127.0.0.1:7070"), "ipv4:127.0.0.1:7070");
  EXPECT_EQ(ChannelTarget("10.1.2.3:1"), "ipv4:10.1.2.3:1");
}

TEST(ChannelTargetTest, EverythingElseIsPassedThrough) {
  for (const char* a : {"localhost:7070", "gpu-1.example.com:7070", "[::1]:7070",
                        "dns:///127.0.0.1:7070", "127.0.0.1", "127.0.0.1:", ":7070",
                        "127.0.0.1:70x", "1.2.3:7070", "unix:/tmp/s"}) {
    EXPECT_EQ(ChannelTarget(a), a) << a;
  }
  // A NUL inside the host (found by the tls_names fuzz target): not an IPv4 literal.
  const std::string nul("127.0.0.1\0x:7070", 16);
  EXPECT_EQ(ChannelTarget(nul), nul);
}

class EchoAgent final : public v1::Agent::Service {
  grpc::Status ReadLog(grpc::ServerContext*, const v1::ReadLogRequest* in,
                       v1::ReadLogResponse* out) override {
    out->set_data("log of " + std::to_string(in->id()));
    return grpc::Status::OK;
  }
};

// A loopback TCP relay to `target_port` that holds back the server's first bytes for
// `delay`: a connection whose handshake is slow (a loaded machine, a sanitizer build, a
// far-away server), without being refused.
class SlowRelay {
 public:
  SlowRelay(int target_port, std::chrono::milliseconds delay)
      : target_port_(target_port), delay_(delay) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(listener_, 8), 0);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~SlowRelay() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }

 private:
  void Loop() {
    struct Pair {
      int client, server;
      std::chrono::steady_clock::time_point hold_until;
    };
    std::vector<Pair> pairs;
    char buf[16384];
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const Pair& p : pairs) {
        fds.push_back({p.client, POLLIN, 0});
        const bool held = std::chrono::steady_clock::now() < p.hold_until;
        fds.push_back({p.server, static_cast<short>(held ? 0 : POLLIN), 0});
      }
      poll(fds.data(), fds.size(), 10);
      const size_t polled = pairs.size();  // a pair accepted below has no entry in fds yet
      if (fds[0].revents & POLLIN) {
        const int client = accept(listener_, nullptr, nullptr);
        const int server = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<uint16_t>(target_port_));
        if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
          pairs.push_back({client, server, std::chrono::steady_clock::now() + delay_});
        } else {
          close(client);
          close(server);
        }
      }
      for (size_t i = 0; i < polled; ++i) {
        const auto pump = [&](short revents, int from, int to) {
          if (!(revents & (POLLIN | POLLHUP | POLLERR))) return true;
          const ssize_t n = read(from, buf, sizeof(buf));
          // MSG_NOSIGNAL: a peer that already closed is the pair's end, not a SIGPIPE that
          // kills the test (1 run in about 800).
          return n > 0 && send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) == n;
        };
        if (!pump(fds[1 + 2 * i].revents, pairs[i].client, pairs[i].server) ||
            !pump(fds[2 + 2 * i].revents, pairs[i].server, pairs[i].client)) {
          close(pairs[i].client);
          close(pairs[i].server);
          pairs[i].client = pairs[i].server = -1;
        }
      }
      std::erase_if(pairs, [](const Pair& p) { return p.client < 0; });
    }
    for (const Pair& p : pairs) {
      close(p.client);
      close(p.server);
    }
  }

  int target_port_;
  std::chrono::milliseconds delay_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A server whose first bytes take 600 ms to arrive is slow, not gone: the first call on a
// new channel still goes through. (MakeChannel once set gRPC's minimum connect timeout to
// 100 ms, which failed CLI calls with "connection attempt timed out before receiving
// SETTINGS frame" whenever a TLS handshake took longer, as under ASan on a busy machine.)
TEST(MakeChannelTest, ASlowHandshakeIsWaitedForNotFailed) {
  EchoAgent service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  SlowRelay relay(port, std::chrono::milliseconds(600));

  auto stub = v1::Agent::NewStub(
      MakeChannel("127.0.0.1:" + std::to_string(relay.port()), false, nullptr));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::ReadLogRequest req;
  req.set_id(7);
  v1::ReadLogResponse resp;
  const grpc::Status s = stub->ReadLog(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.data(), "log of 7");
  server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace gpusched::rpc
