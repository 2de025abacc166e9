#pragma once
// LeaderElection: one server's campaign for leadership of the control plane in etcd.
//
//  - A lease of `ttl_s` seconds, kept alive every ttl/3 by a thread of its own.
//  - Campaign: Txn{If CreateRevision(key) == 0 Then Put(key, identity, lease) Else Get(key)}.
//    The winner's create revision is its fencing token (store/etcd_store.h): every write of
//    its term is a Txn guarded by it. A loser reads the leader's identity and checks again
//    every `poll_ms` (the key vanishes when the leader resigns or its lease expires).
//  - Stepping down: when keepalives have not succeeded for ttl - margin (so that this server
//    stops acting before etcd can expire its key and elect another), when etcd says the lease
//    is gone, or when Depose() is called (the store found itself fenced). The lease is then
//    revoked (best effort) and the campaign starts again with a new one.
//
// The callbacks run on the election thread, never concurrently: on_elected builds the
// leader's control plane (restores from etcd); an error resigns and retries after a pause.
//
// Thread-safety: Start/Stop from one thread; Depose and the getters from any thread.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "store/etcd_client.h"

namespace gpusched::server {

class LeaderElection {
 public:
  struct Options {
    std::string key = "/gpusched/leader";
    std::string identity;  // this server's advertised gRPC address: what standbys name
    int64_t ttl_s = 5;
    int poll_ms = 100;
  };
  struct Callbacks {
    std::function<Status(int64_t create_revision)> on_elected;
    std::function<void(const std::string& why)> on_deposed;
    // A standby learned who leads ("" = nobody) and why it is not leading.
    std::function<void(const std::string& leader, const std::string& detail)> on_standby;
  };
  LeaderElection(std::unique_ptr<store::EtcdClient> client, Options options, Callbacks callbacks);
  ~LeaderElection();  // Stop()

  void Start();
  // Resigns (deletes the key by revoking the lease, so a standby takes over at once) and stops.
  void Stop();
  // Step down now (a fenced write): called from any thread.
  void Depose(const std::string& why);

  bool leading() const { return leading_.load(); }

 private:
  void CampaignLoop();
  // The lease held now (0: none); nullopt once stopping.
  std::optional<int64_t> HeldLease();
  // A new lease, or 0 (said to on_standby) when etcd does not grant one.
  int64_t GrantLease();
  // Creates the leader key under `lease` unless another holds it: the fencing revision when
  // this server leads, nullopt (said to on_standby) when it does not.
  std::optional<int64_t> TryToLead(int64_t lease);
  // Why a leader must step down now ("" = it need not). REQUIRES: mu_ held.
  std::string WhyStepDown(int64_t ttl_ms, int64_t margin_ms) const;
  // Leads until deposed (then steps down, true) or stopped (false).
  bool LeadUntilDeposed();
  void KeepAliveLoop();
  bool Sleep(int ms);  // false when stopping
  void StepDown(const std::string& why);

  std::unique_ptr<store::EtcdClient> client_;     // campaign
  std::unique_ptr<store::EtcdClient> keepalive_;  // lease keepalives, never behind a campaign call
  const Options options_;
  const Callbacks callbacks_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string depose_;                 // set by Depose
  int64_t lease_ = 0;
  std::chrono::steady_clock::time_point last_keepalive_sent_;  // of the last success
  bool lease_gone_ = false;
  std::atomic<bool> leading_{false};
  std::thread campaign_, keepalive_thread_;
};

}  // namespace gpusched::server
