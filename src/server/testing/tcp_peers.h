#pragma once
// TCP peers for probe tests (CN115981827A claim 9): a port that listens, and a silent one.
//
// ListeningPeer: a socket on 127.0.0.1 that listens; the kernel completes connections into its
// backlog, nobody needs to accept them. SilentPeer: the same with a backlog of 0 that is filled
// first, so the kernel drops every further SYN and a connect hangs until its timeout: a peer
// that accepts nothing (a blackhole), not one that refuses.
//
// Thread-safety: none needed; build and destroy on the test's thread.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace gpusched::server::testing {

class ListeningPeer {
 public:
  explicit ListeningPeer(int backlog = 64) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        listen(fd_, backlog) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  virtual ~ListeningPeer() {
    if (fd_ >= 0) close(fd_);
  }
  ListeningPeer(const ListeningPeer&) = delete;
  ListeningPeer& operator=(const ListeningPeer&) = delete;

  // "" when the socket could not be set up.
  const std::string& address() const { return address_; }

 protected:
  int fd_ = -1;
  std::string address_;
};

class SilentPeer final : public ListeningPeer {
 public:
  SilentPeer() : ListeningPeer(0) {
    if (address_.empty()) return;
    // Connect until one connection hangs: from then on the accept queue is full.
    for (int i = 0; i < 16; ++i) {
      if (!ConnectOnce()) return;
    }
    address_.clear();  // never went silent
  }
  ~SilentPeer() override {
    for (int fd : clients_) close(fd);
  }

 private:
  // Whether a connection completed within 200 ms (it is kept open either way).
  bool ConnectOnce() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    clients_.push_back(fd);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0) return true;
    pollfd p{fd, POLLOUT, 0};
    return poll(&p, 1, 200) == 1;
  }
  std::vector<int> clients_;
};

}  // namespace gpusched::server::testing
