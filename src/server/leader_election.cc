#include "server/leader_election.h"

#include <algorithm>

#include "base/log.h"

namespace gpusched::server {

using store::EtcdCompare;
using store::EtcdOp;

namespace {
// How soon a lease that etcd could not revoke is tried again (each try also waits up to the
// client's connect time for a failed connection, which is what dials etcd again).
constexpr int64_t kRevokeRetryMs = 200;
}  // namespace

int64_t LeaderElection::StepDownAfterMs(int64_t ttl_s) {
  const int64_t ttl_ms = ttl_s * 1000;
  // The margin covers the rate difference of this clock and etcd's and a write in flight;
  // writes are fenced anyway (store/etcd_store.h), so it need not be large.
  return ttl_ms - std::max<int64_t>(250, ttl_ms / 10);
}

int64_t LeaderElection::KeepAlivePeriodMs(int64_t ttl_s) {
  return std::max<int64_t>(100, ttl_s * 1000 / 6);
}

LeaderElection::LeaderElection(Clock& clock, std::unique_ptr<store::EtcdClient> client,
                               Options options, Callbacks callbacks)
    : clock_(clock),
      client_(std::move(client)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {
  // A keep-alive waits at most a quarter of the TTL, so that two can fail and a third still
  // lands before StepDownAfterMs.
  store::EtcdClient::Options o = client_->options();
  o.connect_timeout_ms = static_cast<int>(std::max<int64_t>(200, options_.ttl_s * 1000 / 6));
  o.request_timeout_ms = static_cast<int>(std::max<int64_t>(250, options_.ttl_s * 1000 / 4));
  o.retry_for_ms = 0;
  keepalive_ = std::move(store::EtcdClient::Create(client_->endpoints(), o)).value();
}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Start() {
  client_->ResumeWatches();
  campaign_ = std::thread([this] { CampaignLoop(); });
  keepalive_thread_ = std::thread([this] { KeepAliveLoop(); });
}

void LeaderElection::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !campaign_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  client_->CancelWatches();
  if (campaign_.joinable()) campaign_.join();
  if (keepalive_thread_.joinable()) keepalive_thread_.join();
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = lease_;
    lease_ = 0;
  }
  // Resign: revoking the lease deletes the leader key, so a standby takes over at once
  // instead of after the TTL.
  if (lease != 0) (void)client_->LeaseRevoke(lease);
  leading_ = false;
}

void LeaderElection::Depose(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (depose_.empty()) depose_ = why.empty() ? "deposed" : why;
  }
  cv_.notify_all();
}

bool LeaderElection::WaitMs(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_.WaitFor(lock, cv_, ms, [&] { return stop_; });
  return !stop_;
}

void LeaderElection::StepDown(const std::string& why) {
  logging::Warn("server", "stepping down as leader: " + why);
  leading_ = false;
  if (callbacks_.on_deposed) callbacks_.on_deposed(why);
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = lease_;
    lease_ = 0;
    depose_.clear();
  }
  if (lease != 0 && !client_->LeaseRevoke(lease).ok()) unrevoked_lease_ = lease;
  if (callbacks_.on_standby) callbacks_.on_standby("", "stepped down: " + why);
}

bool LeaderElection::RevokeRemembered() {
  if (unrevoked_lease_ == 0) return true;
  const Status s = client_->LeaseRevoke(unrevoked_lease_);  // a lease etcd lost is Ok too
  if (!s.ok() && s.code() == StatusCode::kUnavailable) return false;
  if (s.ok()) {
    logging::Info("server", "revoked the lease of this server's last term (" +
                                std::to_string(unrevoked_lease_) +
                                ") now that etcd answers: its leader key is gone");
  } else {
    // etcd answered and refused: asking again would not change its answer; the lease
    // expires on its own within a TTL.
    logging::Warn("server", "could not revoke the lease of this server's last term (" +
                                std::to_string(unrevoked_lease_) + "): " + s.message());
  }
  unrevoked_lease_ = 0;
  return true;
}

bool LeaderElection::DropGoneLease(int64_t lease) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_ != lease || !lease_gone_) return false;
    lease_ = 0;
    lease_gone_ = false;
  }
  // A standby's keep-alives can fail for a TTL (etcd or this process stalled): etcd then
  // forgets the lease, and a campaign under it would fail for as long as this server runs
  // (a CI run under ASan saw no new leader for 30 s after the leader's kill -9).
  logging::Warn("server", "the lease of this standby (" + std::to_string(lease) +
                              ") expired in etcd: campaigning with a new one");
  return true;
}

std::optional<int64_t> LeaderElection::HeldLease() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return std::nullopt;
  return lease_;
}

int64_t LeaderElection::GrantLease() {
  // Dated from the request: etcd starts the TTL when it grants, which is after this.
  const TimeMs sent = clock_.MonoMs();
  auto granted = client_->LeaseGrant(options_.ttl_s);
  if (!granted.ok()) {
    if (callbacks_.on_standby) {
      callbacks_.on_standby("", "this server cannot reach etcd: " + granted.status().message());
    }
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  lease_ = *granted;
  lease_gone_ = false;
  last_keepalive_sent_ = sent;
  return lease_;
}

std::optional<int64_t> LeaderElection::TryToLead(int64_t lease, int64_t& seen_revision) {
  seen_revision = 0;
  EtcdCompare absent;
  absent.key = options_.key;
  absent.target = EtcdCompare::Target::kCreateRevision;
  absent.number = 0;
  auto txn = client_->Txn({absent}, {EtcdOp::Put(options_.key, options_.identity, lease)},
                          {EtcdOp::Get(options_.key)});
  if (!txn.ok() && txn.status().code() == StatusCode::kNotFound) {
    // "requested lease not found": the key is free and this server's lease expired. The
    // next round campaigns with a new one instead of offering the dead one forever.
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_ == lease) lease_gone_ = true;
  }
  if (!txn.ok()) {
    if (callbacks_.on_standby) {
      callbacks_.on_standby("", "this server cannot reach etcd: " + txn.status().message());
    }
    return std::nullopt;
  }
  seen_revision = txn->revision;
  if (txn->succeeded) return txn->revision;  // the key's create revision: the fencing token
  const store::EtcdKv* held =
      !txn->ranges.empty() && !txn->ranges[0].kvs.empty() ? &txn->ranges[0].kvs[0] : nullptr;
  if (held != nullptr && held->lease == lease) {
    // Our own earlier attempt created the key (its answer was lost and the client sent
    // the Txn again): this server leads since that revision.
    return held->create_revision;
  }
  const std::string leader = held == nullptr ? "" : held->value;
  if (callbacks_.on_standby) callbacks_.on_standby(leader == options_.identity ? "" : leader, "");
  return std::nullopt;
}

bool LeaderElection::WaitForVacancy(int64_t revision) {
  if (revision <= 0) return WaitMs(options_.poll_ms);  // etcd did not answer
  auto events = client_->WatchKey(options_.key, revision + 1, options_.recheck_ms);
  if (!events.ok()) {
    logging::Log(logging::Level::kDebug, "server", "watching the leader key: " + events.status().message());
    return WaitMs(options_.poll_ms);
  }
  return HeldLease().has_value();
}

std::string LeaderElection::WhyStepDown(int64_t ttl_ms, int64_t step_down_after_ms) const {
  const int64_t since = clock_.MonoMs() - last_keepalive_sent_;
  if (!depose_.empty()) return depose_;
  if (lease_gone_) return "etcd no longer has this server's lease";
  if (since > step_down_after_ms) {
    return "no lease keep-alive succeeded for " + std::to_string(since) + " ms (TTL " +
           std::to_string(ttl_ms) + " ms)";
  }
  return "";
}

bool LeaderElection::LeadUntilDeposed() {
  const int64_t ttl_ms = options_.ttl_s * 1000;
  const int64_t after_ms = StepDownAfterMs(options_.ttl_s);
  for (;;) {
    std::string why;
    {
      std::unique_lock<std::mutex> lock(mu_);
      clock_.WaitFor(lock, cv_, 50, [&] { return stop_ || !depose_.empty() || lease_gone_; });
      if (stop_) return false;  // Stop() resigns
      why = WhyStepDown(ttl_ms, after_ms);
    }
    if (!why.empty()) {
      StepDown(why);
      return true;
    }
  }
}

void LeaderElection::CampaignLoop() {
  for (;;) {
    const std::optional<int64_t> held = HeldLease();
    if (!held) return;
    if (!RevokeRemembered()) {
      if (!WaitMs(kRevokeRetryMs)) return;
      continue;
    }
    int64_t lease = *held;
    if (lease != 0 && DropGoneLease(lease)) lease = 0;
    if (lease == 0 && (lease = GrantLease()) == 0) {
      if (!WaitMs(500)) return;
      continue;
    }
    cv_.notify_all();  // the keepalive thread picks up the new lease
    int64_t seen = 0;
    const std::optional<int64_t> revision = TryToLead(lease, seen);
    if (!revision) {
      if (DropGoneLease(lease)) continue;  // etcd said so: campaign again at once
      if (!WaitForVacancy(seen)) return;
      continue;
    }
    logging::Info("server", "elected leader (" + options_.identity + ", fencing revision " +
                                std::to_string(*revision) + ")");
    leading_ = true;
    Status s = callbacks_.on_elected ? callbacks_.on_elected(*revision) : Status::Ok();
    if (!s.ok()) {
      StepDown("could not take over: " + s.message());
      if (!WaitMs(1'000)) return;
      continue;
    }
    if (!LeadUntilDeposed()) return;
  }
}

void LeaderElection::KeepAliveLoop() {
  const int64_t period_ms = KeepAlivePeriodMs(options_.ttl_s);
  for (;;) {
    int64_t lease = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      lease = lease_;
    }
    bool failed = false;
    if (lease != 0) {
      const TimeMs sent = clock_.MonoMs();
      auto ttl = keepalive_->LeaseKeepAlive(lease);
      std::lock_guard<std::mutex> lock(mu_);
      failed = !ttl.ok();
      if (lease_ == lease && ttl.ok()) {
        if (*ttl <= 0) {
          lease_gone_ = true;
        } else {
          last_keepalive_sent_ = std::max(last_keepalive_sent_, sent);
        }
      }
      if (failed) logging::Log(logging::Level::kDebug, "server", "lease keep-alive: " + ttl.status().message());
      cv_.notify_all();
    }
    std::unique_lock<std::mutex> lock(mu_);
    // Wake early for a new lease; after a failure try again soon, on the next endpoint.
    const int64_t wait = lease == 0 ? 50 : (failed ? 100 : period_ms);
    clock_.WaitFor(lock, cv_, wait, [&] { return stop_; });
  }
}

}  // namespace gpusched::server
