#pragma once
// Issue 35: who submits, without tokens. With authentication off, a task runs as the Unix
// user the server can prove on this machine: the owner of the client's end of a loopback TCP
// connection, which the kernel tells through its socket diagnostics (NETLINK_SOCK_DIAG,
// inet_diag: the client's socket looked up by its exact 4-tuple). A caller the server cannot
// prove (another machine, a closed or half-closed connection, a kernel that does not answer)
// is the configured unprivileged default user (ServerConfig::default_user, "nobody"). What a
// client claims (x-gpusched-user, X-Gpusched-User) is never used.
//
// The kernel query sits behind SocketOwnerLookup (real: NetlinkSocketOwnerLookup; fake in
// server/testing/fake_socket_owner.h). Its reply parser, ParseInetDiagReply, reads bytes the
// kernel wrote and is fuzzed anyway (fuzz/inet_diag_fuzzer.cc).
//
// Thread-safety: every function and class here may be used from any thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched::server {

// One end of a TCP connection: a numeric IPv4 or IPv6 address and a port.
struct TcpEndpoint {
  std::string address;
  uint16_t port = 0;
};

// gRPC's ServerContext::peer(): "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000" (brackets possibly
// %-escaped). nullopt for anything else (unix sockets, malformed text).
std::optional<TcpEndpoint> ParseGrpcPeer(std::string_view peer);

// What the kernel says about one socket (inet_diag_msg).
struct InetDiagSocket {
  uint8_t family = 0;
  uint8_t state = 0;  // TCP_ESTABLISHED = 1, ...
  uint16_t local_port = 0, remote_port = 0;  // host byte order
  uint32_t uid = 0;
};
// One datagram of NETLINK_SOCK_DIAG answering an exact lookup: the socket, NotFound (the
// kernel's ENOENT: no such socket), or InvalidArgument/Unavailable for anything else.
StatusOr<InetDiagSocket> ParseInetDiagReply(std::string_view bytes);

class SocketOwnerLookup {
 public:
  virtual ~SocketOwnerLookup() = default;
  // The uid owning this host's ESTABLISHED TCP socket whose local end is `local` and remote
  // end `remote` (the client's socket: local = the client, remote = the server). NotFound
  // when there is none; other errors when the kernel cannot be asked.
  virtual StatusOr<uint32_t> OwnerUid(const TcpEndpoint& local, const TcpEndpoint& remote) = 0;
};

// Asks the kernel (one netlink datagram per lookup, answered within a second).
class NetlinkSocketOwnerLookup final : public SocketOwnerLookup {
 public:
  StatusOr<uint32_t> OwnerUid(const TcpEndpoint& local, const TcpEndpoint& remote) override;
};

class PeerIdentity {
 public:
  // `lookup`: null = the kernel's (NetlinkSocketOwnerLookup).
  PeerIdentity(std::unique_ptr<SocketOwnerLookup> lookup, std::string default_user);

  // The user name of the owner of the client's end of a connection from `client` to
  // `server` (as the server sees them), or default_user when that cannot be proven: `client`
  // is not a loopback address, the kernel knows no such established socket, or its uid has
  // no name here. `server.address` may be empty or a wildcard ("0.0.0.0", "::"): the
  // loopback addresses the connection may have come to are tried.
  std::string UserOf(const TcpEndpoint& client, const TcpEndpoint& server) const;
  const std::string& default_user() const { return default_user_; }

 private:
  std::optional<uint32_t> OwnerOf(const TcpEndpoint& client, const TcpEndpoint& server) const;

  std::unique_ptr<SocketOwnerLookup> lookup_;
  std::string default_user_;
};

}  // namespace gpusched::server
