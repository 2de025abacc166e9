#include "server/peer_identity.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpusched::server {
namespace {

// "::ffff:127.0.0.1" -> "127.0.0.1": the client's socket is IPv4 then.
std::string Unmapped(const std::string& address) {
  constexpr std::string_view kMapped = "::ffff:";
  if (address.size() > kMapped.size() && address.compare(0, kMapped.size(), kMapped) == 0 &&
      address.find('.') != std::string::npos) {
    return address.substr(kMapped.size());
  }
  return address;
}

bool IsLoopback(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, address.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool IsWildcard(const std::string& address) {
  return address.empty() || address == "0.0.0.0" || address == "::";
}

// Fills `out` (16 bytes) with `address` of `family`; false when it is not one.
bool PutAddress(const std::string& address, int family, uint32_t* out) {
  return inet_pton(family, address.c_str(), out) == 1;
}

std::string UserName(uint32_t uid) {
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return "";
  return pw.pw_name != nullptr ? pw.pw_name : "";
}

}  // namespace

std::optional<TcpEndpoint> ParseGrpcPeer(std::string_view peer) {
  std::string text(peer);
  for (auto [from, to] : {std::pair{"%5B", "["}, {"%5D", "]"}, {"%5b", "["}, {"%5d", "]"}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, 3, to);
    }
  }
  std::string host;
  std::string_view rest;
  if (text.rfind("ipv4:", 0) == 0) {
    const size_t colon = text.rfind(':');
    if (colon <= 5) return std::nullopt;
    host = text.substr(5, colon - 5);
    rest = std::string_view(text).substr(colon + 1);
  } else if (text.rfind("ipv6:[", 0) == 0) {
    const size_t close = text.find("]:");
    if (close == std::string::npos) return std::nullopt;
    host = text.substr(6, close - 6);
    rest = std::string_view(text).substr(close + 2);
  } else {
    return std::nullopt;
  }
  if (rest.empty() || rest.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return std::nullopt;
  if (const size_t zone = host.find('%'); zone != std::string::npos) host.resize(zone);
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) != 1 && inet_pton(AF_INET6, host.c_str(), buf) != 1) {
    return std::nullopt;
  }
  return TcpEndpoint{host, static_cast<uint16_t>(port)};
}

StatusOr<InetDiagSocket> ParseInetDiagReply(std::string_view bytes) {
  if (bytes.size() < sizeof(nlmsghdr)) {
    return InvalidArgument("sock_diag: a reply of " + std::to_string(bytes.size()) +
                           " bytes is shorter than its header");
  }
  nlmsghdr h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.nlmsg_len < sizeof h || h.nlmsg_len > bytes.size()) {
    return InvalidArgument("sock_diag: the reply's length " + std::to_string(h.nlmsg_len) +
                           " does not fit the " + std::to_string(bytes.size()) + " bytes read");
  }
  const std::string_view body = bytes.substr(NLMSG_HDRLEN, h.nlmsg_len - NLMSG_HDRLEN);
  if (h.nlmsg_type == NLMSG_ERROR) {
    nlmsgerr e;
    if (body.size() < sizeof e.error) return InvalidArgument("sock_diag: a short error reply");
    std::memcpy(&e.error, body.data(), sizeof e.error);
    if (e.error == -ENOENT) return NotFound("sock_diag: no such socket");
    // Any int may arrive, INT_MIN too: negate as 64-bit, and name an error only in range.
    const int64_t code = e.error < 0 ? -static_cast<int64_t>(e.error) : e.error;
    return Unavailable("sock_diag: the kernel answered " +
                       (code <= 4095 ? std::string(std::strerror(static_cast<int>(code)))
                                     : "error " + std::to_string(e.error)));
  }
  if (h.nlmsg_type != SOCK_DIAG_BY_FAMILY) {
    return InvalidArgument("sock_diag: unexpected reply type " + std::to_string(h.nlmsg_type));
  }
  inet_diag_msg m;
  if (body.size() < sizeof m) {
    return InvalidArgument("sock_diag: a socket reply of " + std::to_string(body.size()) +
                           " bytes (want " + std::to_string(sizeof m) + ")");
  }
  std::memcpy(&m, body.data(), sizeof m);
  InetDiagSocket s;
  s.family = m.idiag_family;
  s.state = m.idiag_state;
  s.local_port = ntohs(m.id.idiag_sport);
  s.remote_port = ntohs(m.id.idiag_dport);
  s.uid = m.idiag_uid;
  return s;
}

StatusOr<uint32_t> NetlinkSocketOwnerLookup::OwnerUid(const TcpEndpoint& local,
                                                       const TcpEndpoint& remote) {
  struct Request {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } req{};
  const int family = local.address.find(':') == std::string::npos ? AF_INET : AF_INET6;
  if (!PutAddress(local.address, family, req.body.id.idiag_src) ||
      !PutAddress(remote.address, family, req.body.id.idiag_dst)) {
    return InvalidArgument("sock_diag: " + local.address + " and " + remote.address +
                           " are not addresses of one family");
  }
  req.header.nlmsg_len = sizeof req;
  req.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.header.nlmsg_flags = NLM_F_REQUEST;
  req.body.sdiag_family = static_cast<uint8_t>(family);
  req.body.sdiag_protocol = IPPROTO_TCP;
  req.body.idiag_states = ~0u;
  req.body.id.idiag_sport = htons(local.port);
  req.body.id.idiag_dport = htons(remote.port);
  req.body.id.idiag_cookie[0] = req.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return Unavailable(std::string("sock_diag: socket: ") + std::strerror(errno));
  timeval timeout{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::vector<char> reply(8192);
  ssize_t n = -1;
  if (sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) ==
      static_cast<ssize_t>(sizeof req)) {
    n = recv(fd, reply.data(), reply.size(), 0);
  }
  const int err = errno;
  close(fd);
  if (n < 0) return Unavailable(std::string("sock_diag: ") + std::strerror(err));
  GS_ASSIGN_OR_RETURN(InetDiagSocket s,
                      ParseInetDiagReply(std::string_view(reply.data(), static_cast<size_t>(n))));
  // Only a live connection's socket: a closed one lingers as a time-wait entry that the
  // kernel reports as uid 0, and a listener on the client's port is somebody else.
  if (s.state != TCP_ESTABLISHED || s.local_port != local.port || s.remote_port != remote.port) {
    return NotFound("sock_diag: no established socket " + local.address + ":" +
                    std::to_string(local.port));
  }
  return s.uid;
}

PeerIdentity::PeerIdentity(std::unique_ptr<SocketOwnerLookup> lookup, std::string default_user)
    : lookup_(lookup ? std::move(lookup) : std::make_unique<NetlinkSocketOwnerLookup>()),
      default_user_(std::move(default_user)) {}

std::optional<uint32_t> PeerIdentity::OwnerOf(const TcpEndpoint& client,
                                              const TcpEndpoint& server) const {
  const std::string from = Unmapped(client.address);
  if (!IsLoopback(from) || client.port == 0 || server.port == 0) return std::nullopt;
  const bool v4 = from.find(':') == std::string::npos;
  std::vector<std::string> to;
  const std::string at = Unmapped(server.address);
  if (!IsWildcard(at)) {
    to.push_back(at);
  } else {
    to.push_back(from);  // the loopback address dialled is usually the one it came from
    to.push_back(v4 ? "127.0.0.1" : "::1");
  }
  for (const std::string& address : to) {
    auto uid = lookup_->OwnerUid({from, client.port}, {address, server.port});
    if (uid.ok()) return *uid;
  }
  return std::nullopt;
}

std::string PeerIdentity::UserOf(const TcpEndpoint& client, const TcpEndpoint& server) const {
  const std::optional<uint32_t> uid = OwnerOf(client, server);
  if (!uid) return default_user_;
  const std::string name = UserName(*uid);
  return name.empty() ? default_user_ : name;
}

}  // namespace gpusched::server
