#include "server/probe_daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gpusched::server {

bool ProbeTcp(const std::string& address, DurationMs timeout_ms) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return false;
  bool ok = false;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    if (rc == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(timeout_ms)) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

void ProbeDaemon::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ProbeDaemon::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProbeDaemon::Run() {
  const DurationMs interval = cp_.config().probe_interval_ms;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (clock_.WaitFor(lock, cv_, interval, [&] { return stop_; })) return;
    }
    for (const auto& [node, address] : cp_.ProbeTargets()) {
      const TimeMs now = clock_.NowMs();
      auto [it, fresh] = last_success_.try_emplace(node, now);  // a new node starts trusted
      if (!fresh && ProbeTcp(address, cp_.config().probe_timeout_ms)) it->second = now;
      cp_.SetProbeResult(node, clock_.NowMs() - it->second <= 2 * interval);
    }
  }
}

}  // namespace gpusched::server
