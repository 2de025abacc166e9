#pragma once
// FaultyProxy: a loopback TCP proxy in front of one etcd member, for tests of what the etcd
// client and store do when a request's fate is unknown. It relays bytes both ways untouched
// until armed; the next request from a client then meets the armed fault:
//   kLoseAnswer  forwarded to etcd, which applies it; the answer is dropped and the client's
//                connection closed (a member that died after committing, a reset link).
//   kHold        kept without an answer (the client times out), and forwarded to etcd only
//                at Release(): a request that lands late, after the client moved on.
// One connection at a time, which is how EtcdClient talks to one endpoint.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace gpusched::store::testing {

class FaultyProxy {
 public:
  enum class Fault { kLoseAnswer, kHold };
  explicit FaultyProxy(int upstream_port);
  ~FaultyProxy();
  FaultyProxy(const FaultyProxy&) = delete;
  FaultyProxy& operator=(const FaultyProxy&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Arm(Fault fault);
  // Waits until an armed fault met a request (true), or `timeout_ms` passed (false).
  bool WaitFaulted(int timeout_ms);
  // kHold: sends the held request to etcd now; returns etcd's answer (status line, headers
  // and body as received), or "" when nothing was held.
  std::string Release();

 private:
  void Serve();
  void Relay(int client);
  int ConnectUpstream() const;

  const int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  Fault fault_ = Fault::kLoseAnswer;
  bool faulted_ = false;
  std::string held_;
  std::thread thread_;
};

}  // namespace gpusched::store::testing
