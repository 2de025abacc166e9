#include "dispatch/gpusched_policy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/check.h"

namespace gpusched::dispatch {
namespace {

// Tickets have bit 63 set, so they never match a RealtimeDispatcher's. With local marks they
// carry the policy's id above bit 40, so no two policies in a process share one; with shared
// marks bit 62 is set and the number comes from the shared table, unique across processes.
std::atomic<uint64_t> next_policy_id{1};
constexpr int kTicketIdShift = 40;
constexpr uint64_t kGpuschedTicketBit = uint64_t{1} << 63;
constexpr uint64_t kSharedTicketBit = uint64_t{1} << 62;

// Without a deadline a blocked Acquire still re-checks this often (a lost wake-up costs at
// most this much). With shared marks it also reclaims the leases of dead processes then.
constexpr DurationMs kWaitSliceMs = 1000;
constexpr DurationMs kSharedWaitSliceMs = 100;

// Leases a service must have released before its own spread replaces prior_spread.
constexpr uint64_t kSpreadWarmup = 10;

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// E[X - a | X > a] for X lognormal with mean `mean` and log-scale spread `s`: the work a lease
// that received `a` still needs.
double MeanResidual(double mean, double s, double a) {
  if (s < 1e-6) return std::max(mean - a, 0.01 * mean);  // a tight estimate: nearly done
  if (a <= 0) return mean;
  const double mu = std::log(mean) - s * s / 2;
  const double z = (std::log(a) - mu) / s;
  const double survive = NormalUpperTail(z);  // P(X > a)
  if (survive < 1e-300) return a * s * s / std::max(z * s, s * s);  // the far tail, asymptotically
  return std::max(mean * NormalUpperTail(z - s) / survive - a, 0.0);
}

// Holds a MarkStore's lock for a scope; status() says whether it was taken.
class StoreLock {
 public:
  explicit StoreLock(MarkStore& store) : store_(store), status_(store.Lock()) {}
  ~StoreLock() {
    if (status_.ok()) store_.Unlock();
  }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  const Status& status() const { return status_; }
  Status Wait(DurationMs ms) {
    status_ = store_.Wait(ms);
    return status_;
  }

 private:
  MarkStore& store_;
  Status status_;
};

std::vector<std::string> ServiceNames(const std::vector<ServiceConfig>& services) {
  std::vector<std::string> names;
  for (const ServiceConfig& s : services) names.push_back(s.name);
  return names;
}

}  // namespace

Status ValidateGpuschedConfig(const GpuschedConfig& config) {
  GS_RETURN_IF_ERROR(ValidateCommonFields(config.gpu_count, kMaxMarkGpus, config.services.size(),
                                          config.learning, config.ema_alpha,
                                          config.max_per_gpu));
  if (config.max_per_gpu > kMaxCoRunners) {
    return InvalidArgument("max_per_gpu: at most " + std::to_string(kMaxCoRunners) +
                           " leases run on one GPU (0: that many), got " +
                           std::to_string(config.max_per_gpu));
  }
  GS_RETURN_IF_ERROR(ValidateAcquireTimeout(config.acquire_timeout));
  if (!(config.min_remaining_fraction >= 0 && config.min_remaining_fraction <= 1)) {
    return InvalidArgument("min_remaining_fraction: must be in [0, 1], got " +
                           std::to_string(config.min_remaining_fraction));
  }
  if (!(config.prior_spread >= 0) || !std::isfinite(config.prior_spread)) {
    return InvalidArgument("prior_spread: must be finite and >= 0, got " +
                           std::to_string(config.prior_spread));
  }
  if (!(config.co_runner_weight >= 0) || !std::isfinite(config.co_runner_weight)) {
    return InvalidArgument("co_runner_weight: must be finite and >= 0, got " +
                           std::to_string(config.co_runner_weight));
  }
  std::set<std::string> names;
  for (const ServiceConfig& s : config.services) {
    if (s.name.empty()) return InvalidArgument("services[].name: must not be empty");
    if (!names.insert(s.name).second) {
      return InvalidArgument("services[].name: duplicate \"" + s.name + "\"");
    }
    if (!(s.cost_time > 0) || !std::isfinite(s.cost_time)) {
      return InvalidArgument("services[" + s.name + "].cost_time: must be finite and > 0 ms, got " +
                             std::to_string(s.cost_time));
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GpuschedPolicy>> GpuschedPolicy::Create(
    GpuschedConfig config, Clock& clock, std::unique_ptr<MarkStore> store) {
  GS_RETURN_IF_ERROR(ValidateGpuschedConfig(config));
  if (store == nullptr) {
    store = std::make_unique<LocalMarkStore>(config.gpu_count, clock);
  } else {
    StoreLock lock(*store);
    GS_RETURN_IF_ERROR(lock.status());
    if (store->table().gpu_count != config.gpu_count) {
      return InvalidArgument("gpu_count: " + std::to_string(config.gpu_count) +
                             " differs from the mark store's " +
                             std::to_string(store->table().gpu_count));
    }
  }
  return std::unique_ptr<GpuschedPolicy>(
      new GpuschedPolicy(std::move(config), clock, std::move(store)));
}

GpuschedPolicy::GpuschedPolicy(GpuschedConfig config, Clock& clock,
                               std::unique_ptr<MarkStore> store)
    : config_(std::move(config)),
      clock_(clock),
      store_(std::move(store)),
      ticket_base_(store_->shared()
                       ? kGpuschedTicketBit | kSharedTicketBit
                       : kGpuschedTicketBit | (next_policy_id.fetch_add(1) << kTicketIdShift)),
      max_per_gpu_(config_.max_per_gpu > 0 ? config_.max_per_gpu : kMaxCoRunners),
      table_(&store_->table()),
      costs_(config_.services, config_.learning, config_.ema_alpha),
      spreads_(config_.services.size()),
      metrics_(ServiceNames(config_.services), config_.gpu_count, clock.NowNs()) {}

StatusOr<int> GpuschedPolicy::ServiceIndex(std::string_view name) const {
  for (size_t i = 0; i < config_.services.size(); ++i) {
    if (config_.services[i].name == name) return static_cast<int>(i);
  }
  return NotFound("service: no service named \"" + std::string(name) + "\"");
}

void GpuschedPolicy::AdvanceLocked(GpuSlots& g, int64_t now_ns) {
  if (now_ns <= g.updated_ns) return;
  if (g.count > 0) {
    const double share_ms =
        static_cast<double>(now_ns - g.updated_ns) / 1e6 / static_cast<double>(g.count);
    for (int i = 0; i < g.count; ++i) g.running[i].received_ms += share_ms;
  }
  g.updated_ns = now_ns;
}

double GpuschedPolicy::Remaining(const RunningSlot& r, double extra_ms) const {
  const double cost = r.expected_ms;
  return std::max(MeanResidual(cost, r.spread, r.received_ms + extra_ms),
                  config_.min_remaining_fraction * cost);
}

double GpuschedPolicy::SpreadLocked(int service) const {
  const SpreadStats& st = spreads_[service];
  if (!config_.learn_spread || st.n < kSpreadWarmup) return config_.prior_spread;
  return std::sqrt(st.m2 / static_cast<double>(st.n - 1));
}

bool GpuschedPolicy::EligibleLocked(int gpu) const {
  const GpuSlots& g = table_->gpus[gpu];
  return g.enabled != 0 && g.count < max_per_gpu_;
}

int GpuschedPolicy::PickLocked(double cost_ms) const {
  int best = -1;
  double best_slowdown = 0;
  for (int gpu = 0; gpu < config_.gpu_count; ++gpu) {
    if (!EligibleLocked(gpu)) continue;
    // Under processor sharing the request and a co-runner slow each other down by as long as
    // both run: m = min(remaining, cost). Relative to each one's cost, that is the slowdown the
    // grant adds (the co-runners' weighted). Strict < keeps the lowest index on a tie.
    const GpuSlots& g = table_->gpus[gpu];
    double slowdown = 0;
    for (int i = 0; i < g.count; ++i) {
      const double m = std::min(Remaining(g.running[i], 0), cost_ms);
      slowdown += m / cost_ms + config_.co_runner_weight * m / g.running[i].expected_ms;
    }
    if (best < 0 || slowdown < best_slowdown) {
      best = gpu;
      best_slowdown = slowdown;
    }
  }
  return best;
}

Lease GpuschedPolicy::GrantLocked(int service, int gpu, double cost_ms, int attempt,
                                  int64_t requested_ns, int64_t now_ns) {
  Lease lease;
  lease.gpu = gpu;
  lease.service = service;
  lease.ticket = ticket_base_ | table_->next_ticket++;
  lease.attempts = attempt;
  lease.requested_ns = requested_ns;
  lease.granted_ns = now_ns;
  GpuSlots& g = table_->gpus[gpu];
  g.running[g.count] = {lease.ticket, cost_ms, 0.0, SpreadLocked(service),
                        static_cast<int32_t>(getpid()), 0};
  g.count++;  // after the slot is written: a holder dying in between leaves no half slot
  // As the patent's lock (claim 4): set when this lease is now the one its GPU's mark names.
  lease.locked = LoadLocked(gpu, now_ns).mark.owner == lease.ticket;
  leases_[lease.ticket] = lease;
  metrics_.OnGrant(service, gpu, /*direct=*/false, now_ns);
  return lease;
}

Status GpuschedPolicy::WaitEndedLocked(int service, const AcquireOptions& options,
                                       int64_t requested_ns, int64_t now_ns) const {
  if (shut_down_) return FailedPrecondition("acquire: the policy is shutting down");
  if (options.cancel != nullptr && options.cancel->cancelled()) {
    return Unavailable("acquire: cancelled");
  }
  if (options.deadline_ns > 0 && now_ns >= options.deadline_ns) {
    return Unavailable("acquire: deadline passed");
  }
  if (config_.acquire_timeout > 0 && now_ns - requested_ns >= config_.acquire_timeout * 1'000'000) {
    int disabled = 0, full = 0;
    for (int g = 0; g < config_.gpu_count; ++g) {
      if (table_->gpus[g].enabled == 0) {
        disabled++;
      } else if (!EligibleLocked(g)) {
        full++;
      }
    }
    return Unavailable("acquire: no GPU granted to service \"" + config_.services[service].name +
                       "\" within acquire_timeout " + std::to_string(config_.acquire_timeout) +
                       " ms (" + std::to_string(full) + " of " + std::to_string(config_.gpu_count) +
                       " GPUs at max_per_gpu " + std::to_string(max_per_gpu_) + ", " +
                       std::to_string(disabled) + " out of service)");
  }
  return Status::Ok();
}

DurationMs GpuschedPolicy::WaitSliceLocked(const AcquireOptions& options, int64_t requested_ns,
                                           int64_t now_ns) const {
  DurationMs wait_ms = store_->shared() ? kSharedWaitSliceMs : kWaitSliceMs;
  auto until = [&](int64_t deadline_ns) {
    wait_ms = std::min<DurationMs>(wait_ms, (deadline_ns - now_ns + 999'999) / 1'000'000);
  };
  if (config_.acquire_timeout > 0) until(requested_ns + config_.acquire_timeout * 1'000'000);
  if (options.deadline_ns > 0) until(options.deadline_ns);
  return std::max<DurationMs>(wait_ms, 1);
}

StatusOr<Lease> GpuschedPolicy::Acquire(int service, const AcquireOptions& options) {
  if (service < 0 || service >= static_cast<int>(config_.services.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  if (!(options.expected_ms >= 0) || !std::isfinite(options.expected_ms)) {
    return InvalidArgument("expected_ms: must be finite and >= 0 (0: the service's cost), got " +
                           std::to_string(options.expected_ms));
  }
  // A cancel wakes the wait below. Declared before the lock, so it is unsubscribed after the
  // lock is let go (the callback takes the lock).
  CancelSubscription subscription(options.cancel, [this] {
    StoreLock lock(*store_);
    if (lock.status().ok()) store_->NotifyAll();
  });
  StoreLock lock(*store_);
  GS_RETURN_IF_ERROR(lock.status());
  const int64_t requested_ns = options.requested_ns > 0 ? options.requested_ns : clock_.NowNs();
  for (int attempt = 1;; ++attempt) {
    const int64_t now_ns = clock_.NowNs();
    if (shut_down_ || (options.cancel != nullptr && options.cancel->cancelled())) {
      return WaitEndedLocked(service, options, requested_ns, now_ns);
    }
    for (int g = 0; g < config_.gpu_count; ++g) AdvanceLocked(table_->gpus[g], now_ns);
    const double cost_ms =
        options.expected_ms > 0 ? options.expected_ms : costs_.cost_exact_ms(service);
    const int gpu = PickLocked(cost_ms);
    if (gpu >= 0) return GrantLocked(service, gpu, cost_ms, attempt, requested_ns, now_ns);
    // Every GPU is out of service or at max_per_gpu: sleep until one of them changes.
    GS_RETURN_IF_ERROR(WaitEndedLocked(service, options, requested_ns, now_ns));
    metrics_.OnGiveUp(service);
    GS_RETURN_IF_ERROR(lock.Wait(WaitSliceLocked(options, requested_ns, now_ns)));
    if (store_->ReclaimDead() > 0) store_->NotifyAll();
  }
}

Status GpuschedPolicy::Release(const Lease& lease, Outcome outcome) {
  StoreLock lock(*store_);
  GS_RETURN_IF_ERROR(lock.status());
  auto it = leases_.find(lease.ticket);
  if (it == leases_.end()) {
    return NotFound("lease: ticket " + std::to_string(lease.ticket) +
                    " is not outstanding on this policy (released already, never granted, "
                    "or another policy's)");
  }
  const Lease granted = it->second;
  GS_RETURN_IF_ERROR(CheckReleaseMatchesGrant(granted, lease));
  leases_.erase(it);
  const int64_t now_ns = clock_.NowNs();
  GpuSlots& g = table_->gpus[granted.gpu];
  AdvanceLocked(g, now_ns);
  int i = 0;
  while (i < g.count && g.running[i].ticket != granted.ticket) ++i;
  if (i < g.count) {  // absent only if another process reclaimed it (it took us for dead)
    // The work the lease received is its run time had it run alone: what cost_time means.
    if (outcome == Outcome::kSucceeded) {
      const RunningSlot& r = g.running[i];
      costs_.Observe(granted.service, r.received_ms);
      if (r.received_ms > 0) {  // how far off the estimate was, on a log scale
        SpreadStats& st = spreads_[granted.service];
        const double x = std::log(r.received_ms / r.expected_ms);
        st.n++;
        const double delta = x - st.mean;
        st.mean += delta / static_cast<double>(st.n);
        st.m2 += delta * (x - st.mean);
      }
    }
    // Keep grant order (GpuLoad reports it); the count drops first, so a holder dying midway
    // leaves at worst a duplicate of a live slot beyond the count.
    const int last = g.count - 1;
    g.count--;
    for (; i < last; ++i) g.running[i] = g.running[i + 1];
  }
  if (outcome == Outcome::kFailed) metrics_.OnFailed(granted.service);
  const double queue_ms = static_cast<double>(granted.granted_ns - granted.requested_ns) / 1e6;
  const double run_ms = static_cast<double>(now_ns - granted.granted_ns) / 1e6;
  metrics_.OnComplete(granted.service, granted.gpu, queue_ms, run_ms, now_ns);
  if (SharedMetricsTable* shared = store_->shared_metrics()) {  // issue 42: every process's
    SharedServiceMetrics* s = ClaimSharedService(*shared, config_.services[granted.service].name);
    if (s != nullptr) RecordShared(*s, granted.gpu, queue_ms, run_ms, outcome == Outcome::kFailed);
  }
  store_->NotifyAll();
  return Status::Ok();
}

Status GpuschedPolicy::SetGpuEnabled(int gpu, bool enabled) {
  if (gpu < 0 || gpu >= config_.gpu_count) {
    return InvalidArgument("gpu: " + std::to_string(gpu) + " out of range [0, " +
                           std::to_string(config_.gpu_count) + ")");
  }
  StoreLock lock(*store_);
  GS_RETURN_IF_ERROR(lock.status());
  table_->gpus[gpu].enabled = enabled ? 1 : 0;
  store_->NotifyAll();
  return Status::Ok();
}

void GpuschedPolicy::Shutdown(bool stop) {
  StoreLock lock(*store_);
  shut_down_ = stop;  // even when a broken shared lock was not taken: waiters re-check it
  if (lock.status().ok()) store_->NotifyAll();
}

GpuLoad GpuschedPolicy::LoadLocked(int gpu, int64_t now_ns) const {
  const GpuSlots& g = table_->gpus[gpu];
  const size_t k = static_cast<size_t>(g.count);
  const double now_ms = static_cast<double>(now_ns) / 1e6;
  GpuLoad out;
  out.co_runners = static_cast<int>(k);
  out.mark.fin_time = static_cast<TimeMs>(std::llround(now_ms));
  if (k == 0) return out;
  // Work each lease still needs, as of now (not yet folded into received_ms).
  const double extra_ms =
      static_cast<double>(std::max<int64_t>(0, now_ns - g.updated_ns)) / 1e6 / static_cast<double>(k);
  std::vector<double> left(k);
  for (size_t i = 0; i < k; ++i) left[i] = Remaining(g.running[i], extra_ms);
  // Under sharing leases finish in order of the work they need: the j-th (0-based) of the
  // sorted ones after the j before it plus (k - j) times its own.
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return left[a] < left[b]; });
  out.expected_finish.resize(k);
  double before = 0;
  for (size_t j = 0; j < k; ++j) {
    const double finish = before + static_cast<double>(k - j) * left[order[j]];
    out.expected_finish[order[j]] = static_cast<TimeMs>(std::llround(now_ms + finish));
    before += left[order[j]];
  }
  out.mark.fin_time = out.expected_finish[order.back()];
  out.mark.owner = g.running[order.back()].ticket;
  return out;
}

GpuLoad GpuschedPolicy::load(int gpu) const {
  GS_CHECK(gpu >= 0 && gpu < config_.gpu_count);
  StoreLock lock(*store_);
  if (!lock.status().ok()) return GpuLoad{};
  return LoadLocked(gpu, clock_.NowNs());
}

DispatchMetrics GpuschedPolicy::Metrics() const {
  StoreLock lock(*store_);
  std::vector<double> costs;
  for (size_t i = 0; i < config_.services.size(); ++i) {
    costs.push_back(costs_.cost_exact_ms(static_cast<int>(i)));
  }
  DispatchMetrics m = metrics_.Snapshot(clock_.NowNs(), costs);
  if (const SharedMetricsTable* shared = store_->shared_metrics()) OverlaySharedMetrics(*shared, m);
  return m;
}

double GpuschedPolicy::cost_time_ms(int service) const {
  StoreLock lock(*store_);
  return costs_.cost_exact_ms(service);
}

int GpuschedPolicy::outstanding() const {
  StoreLock lock(*store_);
  return static_cast<int>(leases_.size());
}

}  // namespace gpusched::dispatch
