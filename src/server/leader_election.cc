#include "server/leader_election.h"

#include <iostream>

#include "base/log.h"

namespace gpusched::server {

using store::EtcdCompare;
using store::EtcdOp;

LeaderElection::LeaderElection(std::unique_ptr<store::EtcdClient> client, Options options,
                               Callbacks callbacks)
    : client_(std::move(client)), options_(std::move(options)), callbacks_(std::move(callbacks)) {
  // Keepalives time out within a third of the TTL, so one slow answer never costs the lease.
  store::EtcdClient::Options o;
  o.connect_timeout_ms = static_cast<int>(std::max<int64_t>(200, options_.ttl_s * 1000 / 6));
  o.request_timeout_ms = static_cast<int>(std::max<int64_t>(500, options_.ttl_s * 1000 / 3));
  keepalive_ = std::move(store::EtcdClient::Create(client_->endpoints(), o)).value();
}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Start() {
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

bool LeaderElection::Sleep(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
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
  // Best effort: when etcd is unreachable the lease expires by itself.
  if (lease != 0) (void)client_->LeaseRevoke(lease);
  if (callbacks_.on_standby) callbacks_.on_standby("", "stepped down: " + why);
}

std::optional<int64_t> LeaderElection::HeldLease() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return std::nullopt;
  return lease_;
}

int64_t LeaderElection::GrantLease() {
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
  last_keepalive_sent_ = std::chrono::steady_clock::now();
  return lease_;
}

std::optional<int64_t> LeaderElection::TryToLead(int64_t lease) {
  EtcdCompare absent;
  absent.key = options_.key;
  absent.target = EtcdCompare::Target::kCreateRevision;
  absent.number = 0;
  auto txn = client_->Txn({absent}, {EtcdOp::Put(options_.key, options_.identity, lease)},
                          {EtcdOp::Get(options_.key)});
  if (!txn.ok()) {
    if (callbacks_.on_standby) {
      callbacks_.on_standby("", "this server cannot reach etcd: " + txn.status().message());
    }
    return std::nullopt;
  }
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

std::string LeaderElection::WhyStepDown(int64_t ttl_ms, int64_t margin_ms) const {
  const int64_t since = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - last_keepalive_sent_)
                            .count();
  if (!depose_.empty()) return depose_;
  if (lease_gone_) return "etcd no longer has this server's lease";
  if (since > ttl_ms - margin_ms) {
    return "no lease keepalive succeeded for " + std::to_string(since) + " ms (TTL " +
           std::to_string(ttl_ms) + " ms)";
  }
  return "";
}

bool LeaderElection::LeadUntilDeposed() {
  const int64_t ttl_ms = options_.ttl_s * 1000;
  // Stop acting a margin before etcd may expire the lease and elect another leader.
  const int64_t margin_ms = std::max<int64_t>(500, ttl_ms / 5);
  for (;;) {
    std::string why;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) return false;  // Stop() resigns
      why = WhyStepDown(ttl_ms, margin_ms);
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
    int64_t lease = *held;
    if (lease == 0 && (lease = GrantLease()) == 0) {
      if (!Sleep(500)) return;
      continue;
    }
    cv_.notify_all();  // the keepalive thread picks up the new lease
    const std::optional<int64_t> revision = TryToLead(lease);
    if (!revision) {
      if (!Sleep(options_.poll_ms)) return;
      continue;
    }
    logging::Info("server", "elected leader (" + options_.identity + ", fencing revision " +
                                std::to_string(*revision) + ")");
    leading_ = true;
    Status s = callbacks_.on_elected ? callbacks_.on_elected(*revision) : Status::Ok();
    if (!s.ok()) {
      StepDown("could not take over: " + s.message());
      if (!Sleep(1'000)) return;
      continue;
    }
    if (!LeadUntilDeposed()) return;
  }
}

void LeaderElection::KeepAliveLoop() {
  const int period_ms = static_cast<int>(std::max<int64_t>(100, options_.ttl_s * 1000 / 3));
  for (;;) {
    int64_t lease = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      lease = lease_;
    }
    if (lease != 0) {
      const auto sent = std::chrono::steady_clock::now();
      auto ttl = keepalive_->LeaseKeepAlive(lease);
      std::lock_guard<std::mutex> lock(mu_);
      if (lease_ == lease && ttl.ok()) {
        if (*ttl <= 0) {
          lease_gone_ = true;
        } else {
          last_keepalive_sent_ = sent;
        }
      }
      cv_.notify_all();
    }
    std::unique_lock<std::mutex> lock(mu_);
    // Wake early for a new lease (its first keepalive is due a third of a TTL later anyway).
    cv_.wait_for(lock, std::chrono::milliseconds(lease == 0 ? 50 : period_ms), [&] { return stop_; });
  }
}

}  // namespace gpusched::server
