#include "server/peer_identity.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/testing/fake_socket_owner.h"

namespace gpusched::server {
namespace {

using testing::FakeSocketOwnerLookup;

TEST(PeerIdentityTest, ParsesGrpcPeers) {
  auto v4 = ParseGrpcPeer("ipv4:127.0.0.1:5000");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->address, "127.0.0.1");
  EXPECT_EQ(v4->port, 5000);
  for (const char* six : {"ipv6:[::1]:7", "ipv6:%5B::1%5D:7"}) {
    auto v6 = ParseGrpcPeer(six);
    ASSERT_TRUE(v6) << six;
    EXPECT_EQ(v6->address, "::1");
    EXPECT_EQ(v6->port, 7);
  }
  for (const char* bad : {"", "unix:/tmp/s", "ipv4:127.0.0.1", "ipv4:127.0.0.1:0",
                          "ipv4:127.0.0.1:70000", "ipv4:host:80", "ipv6:::1:80", "ipv4::80"}) {
    EXPECT_FALSE(ParseGrpcPeer(bad)) << bad;
  }
}

// Issue 35: a loopback connection is its owner's; a header or a remote address proves nothing.
TEST(PeerIdentityTest, Issue35_OnlyALoopbackSocketsOwnerIsProven) {
  auto fake = std::make_unique<FakeSocketOwnerLookup>();
  FakeSocketOwnerLookup& f = *fake;
  f.Add({"127.0.0.1", 40000}, {"127.0.0.1", 7070}, 0);
  f.Add({"10.1.2.3", 40001}, {"10.1.2.4", 7070}, 0);
  PeerIdentity peers(std::move(fake), "nobody");
  EXPECT_EQ(peers.UserOf({"127.0.0.1", 40000}, {"127.0.0.1", 7070}), "root");
  EXPECT_EQ(peers.UserOf({"::ffff:127.0.0.1", 40000}, {"::ffff:127.0.0.1", 7070}), "root");
  // Not loopback: never asked, whatever the kernel would say.
  f.asked.clear();
  EXPECT_EQ(peers.UserOf({"10.1.2.3", 40001}, {"10.1.2.4", 7070}), "nobody");
  EXPECT_TRUE(f.asked.empty());
  // Unknown socket, and a kernel that does not answer.
  EXPECT_EQ(peers.UserOf({"127.0.0.1", 40002}, {"127.0.0.1", 7070}), "nobody");
  f.fail = true;
  EXPECT_EQ(peers.UserOf({"127.0.0.1", 40000}, {"127.0.0.1", 7070}), "nobody");
}

TEST(PeerIdentityTest, AWildcardListenerTriesTheLoopbackAddresses) {
  auto fake = std::make_unique<FakeSocketOwnerLookup>();
  FakeSocketOwnerLookup& f = *fake;
  f.Add({"127.0.0.5", 40000}, {"127.0.0.1", 7070}, 0);
  PeerIdentity peers(std::move(fake), "nobody");
  EXPECT_EQ(peers.UserOf({"127.0.0.5", 40000}, {"0.0.0.0", 7070}), "root");
  ASSERT_EQ(f.asked.size(), 2u);
  EXPECT_EQ(std::get<2>(f.asked[0]), "127.0.0.5");
  EXPECT_EQ(std::get<2>(f.asked[1]), "127.0.0.1");
}

std::string Reply(uint16_t type, const void* body, size_t size) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + size);
  h.nlmsg_type = type;
  std::string out(NLMSG_HDRLEN + size, '\0');
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + NLMSG_HDRLEN, body, size);
  return out;
}

TEST(PeerIdentityTest, ParsesTheKernelsReplies) {
  inet_diag_msg m{};
  m.idiag_family = AF_INET;
  m.idiag_state = TCP_ESTABLISHED;
  m.id.idiag_sport = htons(40000);
  m.id.idiag_dport = htons(7070);
  m.idiag_uid = 1234;
  auto s = ParseInetDiagReply(Reply(SOCK_DIAG_BY_FAMILY, &m, sizeof m));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->uid, 1234u);
  EXPECT_EQ(s->local_port, 40000);
  EXPECT_EQ(s->remote_port, 7070);
  EXPECT_EQ(s->state, TCP_ESTABLISHED);
  nlmsgerr e{};
  e.error = -ENOENT;
  EXPECT_EQ(ParseInetDiagReply(Reply(NLMSG_ERROR, &e, sizeof e)).status().code(),
            StatusCode::kNotFound);
  e.error = -EPERM;
  EXPECT_EQ(ParseInetDiagReply(Reply(NLMSG_ERROR, &e, sizeof e)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_FALSE(ParseInetDiagReply(Reply(SOCK_DIAG_BY_FAMILY, &m, sizeof m - 1)).ok());
  EXPECT_FALSE(ParseInetDiagReply("short").ok());
  std::string lying = Reply(SOCK_DIAG_BY_FAMILY, &m, sizeof m);
  lying.resize(lying.size() - 4);  // the header says more than there is
  EXPECT_FALSE(ParseInetDiagReply(lying).ok());
}

// The real kernel: a connection this process made is found, owned by this process's uid.
TEST(PeerIdentityTest, TheKernelNamesTheOwnerOfALoopbackConnection) {
  const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(server, 4), 0);
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  sockaddr_in c{};
  len = sizeof c;
  ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&c), &len), 0);
  NetlinkSocketOwnerLookup kernel;
  auto uid = kernel.OwnerUid({"127.0.0.1", ntohs(c.sin_port)}, {"127.0.0.1", ntohs(a.sin_port)});
  if (!uid.ok() && uid.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << "no socket diagnostics here: " << uid.status().message();
  }
  ASSERT_TRUE(uid.ok()) << uid.status().message();
  EXPECT_EQ(*uid, geteuid());
  // The listener's port as a client port: no such established socket.
  EXPECT_FALSE(kernel.OwnerUid({"127.0.0.1", ntohs(a.sin_port)}, {"127.0.0.1", 1}).ok());
  close(client);
  close(server);
}

}  // namespace
}  // namespace gpusched::server
