#pragma once
// FaultyProxy: a loopback etcd in front of one real etcd member, for tests of what the etcd
// client and store do when a request's fate is unknown. It serves etcd's KV service (gRPC,
// proto/etcd/) and relays every call to the member untouched until armed; the next KV call
// then meets the armed fault:
//   kRefuse      not forwarded; answered UNAVAILABLE (the request never reached etcd).
//   kLoseAnswer  forwarded to etcd, which applies it; the answer is dropped and the caller
//                told UNAVAILABLE (a member that died after committing, a reset link).
//   kHold        kept without an answer (the caller times out), and forwarded to etcd only
//                at Release(): a request that lands late, after the caller moved on.
// Only KV is served: a client that is given the proxy's URL for leases or watches gets
// UNIMPLEMENTED, an answer from "etcd", and does not fail over.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace gpusched::store::testing {

class FaultyProxy {
 public:
  enum class Fault { kRefuse, kLoseAnswer, kHold };
  // `upstream`: the member's client URL ("http://127.0.0.1:2379") or its port on loopback.
  explicit FaultyProxy(const std::string& upstream);
  explicit FaultyProxy(int upstream_port);
  ~FaultyProxy();
  FaultyProxy(const FaultyProxy&) = delete;
  FaultyProxy& operator=(const FaultyProxy&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Arm(Fault fault);
  // Waits until an armed fault met a request (true), or `timeout_ms` passed (false).
  bool WaitFaulted(int timeout_ms);
  // kHold: sends the held request to etcd now and says what etcd answered: "txn succeeded",
  // "txn failed" (its comparisons failed), "ok" (another call), "error: ..."; "" when nothing
  // was held.
  std::string Release();
  // KV calls relayed to etcd so far (faulted ones included when they reached etcd).
  int forwarded() const;

  struct Service;  // the KV service (faulty_proxy.cc)

 private:
  int port_ = 0;
  std::unique_ptr<Service> service_;
};

}  // namespace gpusched::store::testing
