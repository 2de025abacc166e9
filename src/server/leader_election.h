#pragma once
// LeaderElection: one server's campaign for leadership of the control plane in etcd.
//
//  - A lease of `ttl_s` seconds, kept alive over etcd's keep-alive stream every ttl/6 by a
//    thread and a connection of its own; a keep-alive that fails is retried after 100 ms,
//    each waiting at most ttl/4 for its answer.
//  - Campaign: Txn{If CreateRevision(key) == 0 Then Put(key, identity, lease) Else Get(key)}.
//    The winner's create revision is its fencing token (store/etcd_store.h): every write of
//    its term is a Txn guarded by it. A loser reads the leader's identity and watches the key
//    (issue 38: etcd's Watch, not polling); it campaigns again as soon as the key is deleted
//    (the leader resigned or its lease expired), and at least every `recheck_ms`.
//  - Stepping down: when no keep-alive has succeeded for ttl - margin, dated from when the
//    successful request (or the lease's grant) was SENT, so that this server stops acting
//    before etcd can expire its key and elect another; when etcd says the lease is gone; or
//    when Depose() is called (the store found itself fenced). The lease is then revoked and
//    the campaign starts again with a new one. A standby whose lease etcd forgot (no
//    keep-alive for a TTL) campaigns with a new one too. A revocation that fails (etcd unreachable) is
//    remembered and retried before the next campaign, so that after an etcd outage the old
//    key goes at once and a leader is elected without waiting out a TTL that etcd renewed.
//  - Every duration is measured on the Clock it is given (a FakeClock in tests); the etcd
//    calls themselves wait on real time.
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

#include "base/clock.h"
#include "base/status.h"
#include "store/etcd_client.h"

namespace gpusched::server {

class LeaderElection {
 public:
  struct Options {
    std::string key = "/gpusched/leader";
    std::string identity;  // this server's advertised gRPC address: what standbys name
    int64_t ttl_s = 5;
    int poll_ms = 100;        // pause before campaigning again when etcd cannot be watched
    int recheck_ms = 5'000;   // the longest a standby watches before it checks the key again
  };
  struct Callbacks {
    std::function<Status(int64_t create_revision)> on_elected;
    std::function<void(const std::string& why)> on_deposed;
    // A standby learned who leads ("" = nobody) and why it is not leading.
    std::function<void(const std::string& leader, const std::string& detail)> on_standby;
  };
  // `clock` outlives this. The keep-alive stream gets a client (and a connection) of its own
  // to `client`'s endpoints, with the same TLS and user, its timeouts set from the TTL.
  LeaderElection(Clock& clock, std::unique_ptr<store::EtcdClient> client,
                 Options options, Callbacks callbacks);
  ~LeaderElection();  // Stop()

  void Start();
  // Resigns (deletes the key by revoking the lease, so a standby takes over at once) and stops.
  void Stop();
  // Step down now (a fenced write): called from any thread.
  void Depose(const std::string& why);

  bool leading() const { return leading_.load(); }

  // The ttl - margin a leader may go without a successful keep-alive, and the keep-alive
  // period: from the TTL (exposed for the tests and the status page).
  static int64_t StepDownAfterMs(int64_t ttl_s);
  static int64_t KeepAlivePeriodMs(int64_t ttl_s);

 private:
  void CampaignLoop();
  // The lease held now (0: none); nullopt once stopping.
  std::optional<int64_t> HeldLease();
  // Whether `lease`, held now, is gone in etcd (a keep-alive or the campaign's Txn said so):
  // then forgets it (true), and the campaign grants a new one.
  bool DropGoneLease(int64_t lease);
  // A new lease, or 0 (said to on_standby) when etcd does not grant one.
  int64_t GrantLease();
  // Creates the leader key under `lease` unless another holds it: the fencing revision when
  // this server leads, nullopt (said to on_standby) when it does not; `seen_revision` gets
  // etcd's revision of the answer (0 when etcd did not answer).
  std::optional<int64_t> TryToLead(int64_t lease, int64_t& seen_revision);
  // A standby's wait: until the leader key changes after `revision`, recheck_ms passes, or
  // Stop(). False when stopping.
  bool WaitForVacancy(int64_t revision);
  // Revokes the lease a failed StepDown could not (etcd was unreachable then). False while
  // etcd cannot be reached to do it: the campaign waits, because a campaign now would find
  // the leader key still held by that lease (etcd renews every lease for a whole TTL when it
  // comes back) and wait out the TTL instead of revoking it a moment later.
  bool RevokeRemembered();
  bool WaitMs(int64_t ms);  // on the clock; false when stopping
  // Why a leader must step down now ("" = it need not). REQUIRES: mu_ held.
  std::string WhyStepDown(int64_t ttl_ms, int64_t margin_ms) const;
  // Leads until deposed (then steps down, true) or stopped (false).
  bool LeadUntilDeposed();
  void KeepAliveLoop();
  void StepDown(const std::string& why);

  Clock& clock_;
  std::unique_ptr<store::EtcdClient> client_;     // campaign
  std::unique_ptr<store::EtcdClient> keepalive_;  // lease keepalives, never behind a campaign call
  const Options options_;
  const Callbacks callbacks_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string depose_;                 // set by Depose
  int64_t lease_ = 0;
  TimeMs last_keepalive_sent_ = 0;  // clock_'s monotonic ms: when the last success was sent
  bool lease_gone_ = false;
  int64_t unrevoked_lease_ = 0;     // a lease StepDown could not revoke (campaign thread)
  std::atomic<bool> leading_{false};
  std::thread campaign_, keepalive_thread_;
};

}  // namespace gpusched::server
