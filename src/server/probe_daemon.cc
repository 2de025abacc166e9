#include "server/probe_daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "base/host_port.h"

namespace gpusched::server {

bool ProbeTcp(const std::string& address, DurationMs timeout_ms) {
  const StatusOr<HostPort> hp = ParseHostPort(address, "address");
  if (!hp.ok()) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &res) != 0 ||
      res == nullptr) {
    return false;
  }
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

std::vector<bool> ProbeConcurrently(const std::vector<std::string>& addresses,
                                    DurationMs timeout_ms, Executor& pool) {
  std::vector<char> ok(addresses.size(), 0);  // not vector<bool>: written from many threads
  pool.ParallelFor(addresses.size(),
                   [&](size_t i) { ok[i] = ProbeTcp(addresses[i], timeout_ms) ? 1 : 0; });
  return std::vector<bool>(ok.begin(), ok.end());
}

void ProbeDaemon::Start() {
  cp_.AttachProber([this] { Wake(); });
  thread_ = std::thread([this] { Run(); });
}

void ProbeDaemon::Stop() {
  cp_.AttachProber(nullptr);  // after this returns, no Wake() is running or will run
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProbeDaemon::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void ProbeDaemon::Run() {
  const DurationMs interval = cp_.config().probe_interval_ms;
  TimeMs next_round = clock_.NowMs() + interval;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      clock_.WaitFor(lock, cv_, next_round - clock_.NowMs(), [&] { return stop_ || wake_; });
      if (stop_) return;
      wake_ = false;
    }
    const bool full = clock_.NowMs() >= next_round;
    if (full) next_round = clock_.NowMs() + interval;
    Round(cp_.ProbeTargets(/*first_only=*/!full), interval);
  }
}

void ProbeDaemon::Round(const std::vector<ControlPlane::ProbeTarget>& targets,
                        DurationMs interval) {
  std::vector<std::string> addresses;
  for (const auto& t : targets) addresses.push_back(t.address);
  const std::vector<bool> ok = ProbeConcurrently(addresses, cp_.config().probe_timeout_ms, pool_);
  const TimeMs now = clock_.NowMs();
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string& node = targets[i].node;
    if (ok[i]) {
      last_success_[node] = now;
    } else if (targets[i].first) {
      // A node that registered again is judged by its new probes alone: a success from
      // before it went away proves nothing about the address it gives now.
      last_success_.erase(node);
    }
    auto it = last_success_.find(node);
    cp_.SetProbeResult(node, it != last_success_.end() && now - it->second <= 2 * interval);
  }
}

}  // namespace gpusched::server
