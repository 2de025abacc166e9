#include "store/testing/faulty_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "store/etcd_client.h"

namespace gpusched::store::testing {
namespace {

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Appends what `fd` has within `timeout_ms`; false on EOF, error or silence.
bool ReadSome(int fd, std::string& buf, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  char chunk[16384];
  const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buf.append(chunk, static_cast<size_t>(n));
  return true;
}

// The client's requests are small POSTs with a Content-Length (EtcdClient writes them so).
bool RequestComplete(const std::string& buf) {
  const size_t end = buf.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const std::string head = buf.substr(0, end);
  size_t length = 0;
  for (const char* name : {"Content-Length:", "content-length:"}) {
    if (size_t at = head.find(name); at != std::string::npos) {
      length = std::strtoul(head.c_str() + at + std::strlen(name), nullptr, 10);
    }
  }
  return buf.size() >= end + 4 + length;
}

}  // namespace

FaultyProxy::FaultyProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 8) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::abort();  // a test fixture without a loopback socket cannot run at all
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

FaultyProxy::~FaultyProxy() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

void FaultyProxy::Arm(Fault fault) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  fault_ = fault;
  faulted_ = false;
}

bool FaultyProxy::WaitFaulted(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return faulted_; });
}

int FaultyProxy::ConnectUpstream() const {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(upstream_port_));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

std::string FaultyProxy::Release() {
  std::string request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    request.swap(held_);
  }
  if (request.empty()) return "";
  const int up = ConnectUpstream();
  if (up < 0 || !SendAll(up, request)) {
    if (up >= 0) ::close(up);
    return "";
  }
  std::string buf;
  auto answer = ReadHttpAnswer([&](std::string& b) { return ReadSome(up, b, 5'000); }, buf);
  ::close(up);
  return answer.ok() ? answer->body : "";
}

void FaultyProxy::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Relay(client);
    ::close(client);
  }
}

void FaultyProxy::Relay(int client) {
  const int up = ConnectUpstream();
  if (up < 0) return;
  std::string pending;  // the start of a request an armed fault waits to see whole
  while (!stop_) {
    pollfd p[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    char chunk[16384];
    if (p[1].revents != 0) {  // etcd -> client, untouched
      const ssize_t n = ::recv(up, chunk, sizeof chunk, 0);
      if (n <= 0 || !SendAll(client, std::string(chunk, static_cast<size_t>(n)))) break;
    }
    if (p[0].revents == 0) continue;
    const ssize_t n = ::recv(client, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    bool armed = false;
    Fault fault = Fault::kLoseAnswer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      armed = armed_;
      fault = fault_;
    }
    if (!armed) {
      if (!SendAll(up, std::string(chunk, static_cast<size_t>(n)))) break;
      continue;
    }
    pending.append(chunk, static_cast<size_t>(n));
    while (!RequestComplete(pending) && ReadSome(client, pending, 2'000)) {
    }
    if (fault == Fault::kLoseAnswer) {
      // etcd applies it; its answer goes nowhere and the client sees its connection close.
      std::string answer;
      if (SendAll(up, pending)) ReadSome(up, answer, 5'000);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = pending;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      armed_ = false;
      faulted_ = true;
    }
    cv_.notify_all();
    if (fault == Fault::kHold) {
      // Keep the client waiting: it gives up by its own timeout and closes.
      while (!stop_) {
        pollfd c{client, POLLIN, 0};
        if (::poll(&c, 1, 50) == 1 && ::recv(client, chunk, sizeof chunk, 0) <= 0) break;
      }
    }
    break;
  }
  ::close(up);
}

}  // namespace gpusched::store::testing
