#include "dispatch/gpusched_policy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
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

// Issue 42, item 5: the per-GPU vectors and the affinity options.
Status ValidatePlacementInputs(const GpuschedConfig& config) {
  const size_t n = static_cast<size_t>(config.gpu_count);
  if (!config.gpu_memory_mib.empty() && config.gpu_memory_mib.size() != n) {
    return InvalidArgument("gpu_memory_mib: " + std::to_string(config.gpu_memory_mib.size()) +
                           " entries for " + std::to_string(n) + " GPUs (give none or one each)");
  }
  for (size_t g = 0; g < config.gpu_memory_mib.size(); ++g) {
    if (config.gpu_memory_mib[g] <= 0) {
      return InvalidArgument("gpu_memory_mib[" + std::to_string(g) + "]: must be > 0, got " +
                             std::to_string(config.gpu_memory_mib[g]));
    }
  }
  if (!config.gpu_speed.empty() && config.gpu_speed.size() != n) {
    return InvalidArgument("gpu_speed: " + std::to_string(config.gpu_speed.size()) +
                           " entries for " + std::to_string(n) + " GPUs (give none or one each)");
  }
  for (size_t g = 0; g < config.gpu_speed.size(); ++g) {
    if (!(config.gpu_speed[g] > 0) || !std::isfinite(config.gpu_speed[g])) {
      return InvalidArgument("gpu_speed[" + std::to_string(g) + "]: must be finite and > 0, got " +
                             std::to_string(config.gpu_speed[g]));
    }
  }
  if (!(config.affinity_margin_ms >= 0) || !std::isfinite(config.affinity_margin_ms)) {
    return InvalidArgument("affinity_margin_ms: must be finite and >= 0, got " +
                           std::to_string(config.affinity_margin_ms));
  }
  if (config.models_per_gpu < 0) {
    return InvalidArgument("models_per_gpu: must be >= 0, got " +
                           std::to_string(config.models_per_gpu));
  }
  return Status::Ok();
}

// Erases a waiting request's key when its Acquire returns (under the store's lock, which is
// taken before and let go after), and wakes the others: the queue's order changed.
class WaitSeat {
 public:
  WaitSeat(WaitQueue& q, MarkStore& store, WaitQueue::Key key) : q_(q), store_(store), key_(key) {}
  ~WaitSeat() {
    if (q_.Remove(key_)) store_.NotifyAll();
  }
  WaitSeat(const WaitSeat&) = delete;
  WaitSeat& operator=(const WaitSeat&) = delete;
  const WaitQueue::Key& key() const { return key_; }

 private:
  WaitQueue& q_;
  MarkStore& store_;
  WaitQueue::Key key_;
};

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
  GS_RETURN_IF_ERROR(ValidatePlacementInputs(config));
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
    if (!config.gpu_memory_mib.empty()) {
      return InvalidArgument("gpu_memory_mib: not supported with shared marks (other processes' "
                             "leases would not be counted)");
    }
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
      metrics_(ServiceNames(config_.services), config_.gpu_count, clock.NowNs()),
      memory_(config_.gpu_memory_mib),
      affinity_(config_.gpu_count, config_.models_per_gpu),
      speeds_(config_.gpu_count, static_cast<int>(config_.services.size()), config_.gpu_speed,
              config_.learn_speed) {}

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

std::pair<double, double> GpuschedPolicy::ScoreLocked(int gpu, const Ask& ask) const {
  // Under processor sharing the request and a co-runner slow each other down by as long as
  // both run: m = min(remaining, cost). Relative to each one's cost, that is the slowdown the
  // grant adds (the co-runners' weighted). On a slower GPU the request's own cost grows by its
  // speed factor; the excess over the fastest GPU's cost counts as slowdown too.
  const GpuSlots& g = table_->gpus[gpu];
  const double cost = ask.cost_ms * speeds_.factor(gpu);
  double slowdown = (cost - ask.cost_ms) / ask.cost_ms;
  double finish = cost;
  for (int i = 0; i < g.count; ++i) {
    const double m = std::min(Remaining(g.running[i], 0), cost);
    slowdown += m / cost + config_.co_runner_weight * m / g.running[i].expected_ms;
    finish += m;
  }
  return {slowdown, finish};
}

int GpuschedPolicy::PickLocked(const Ask& ask) const {
  int best = -1, affine = -1;
  double best_slowdown = 0, affine_finish = 0;
  double earliest = std::numeric_limits<double>::infinity();
  for (int gpu = 0; gpu < config_.gpu_count; ++gpu) {
    if (!EligibleLocked(gpu) || !memory_.Fits(gpu, ask.mem_mib)) continue;
    const auto [slowdown, finish] = ScoreLocked(gpu, ask);
    // Strict < keeps the lowest index on a tie.
    if (best < 0 || slowdown < best_slowdown) {
      best_slowdown = slowdown;
      best = gpu;
    }
    earliest = std::min(earliest, finish);
    if (ask.model != nullptr && affinity_.Has(gpu, *ask.model) &&
        (affine < 0 || finish < affine_finish)) {
      affine = gpu;
      affine_finish = finish;
    }
  }
  if (affine >= 0 && affine_finish <= earliest + config_.affinity_margin_ms) return affine;
  return best;
}

Lease GpuschedPolicy::GrantLocked(int service, int gpu, const Ask& ask, int attempt,
                                  int64_t requested_ns, int64_t now_ns) {
  Lease lease;
  lease.gpu = gpu;
  lease.service = service;
  lease.ticket = ticket_base_ | table_->next_ticket++;
  lease.attempts = attempt;
  lease.requested_ns = requested_ns;
  lease.granted_ns = now_ns;
  GpuSlots& g = table_->gpus[gpu];
  // The slot's expected run time is on this GPU (its speed factor applied).
  g.running[g.count] = {lease.ticket, ask.cost_ms * speeds_.factor(gpu), 0.0, SpreadLocked(service),
                        static_cast<int32_t>(getpid()), 0};
  g.count++;  // after the slot is written: a holder dying in between leaves no half slot
  // As the patent's lock (claim 4): set when this lease is now the one its GPU's mark names.
  lease.locked = LoadLocked(gpu, now_ns).mark.owner == lease.ticket;
  leases_[lease.ticket] = lease;
  if (ask.mem_mib > 0) {
    memory_.Take(gpu, ask.mem_mib);
    lease_mem_mib_[lease.ticket] = ask.mem_mib;
  }
  if (ask.model != nullptr) affinity_.Touch(gpu, *ask.model);
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

Status GpuschedPolicy::CheckRequest(int service, const AcquireOptions& options) const {
  if (service < 0 || service >= static_cast<int>(config_.services.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  if (!(options.expected_ms >= 0) || !std::isfinite(options.expected_ms)) {
    return InvalidArgument("expected_ms: must be finite and >= 0 (0: the service's cost), got " +
                           std::to_string(options.expected_ms));
  }
  if (options.expected_mem_mib < 0) {
    return InvalidArgument("expected_mem_mib: must be >= 0, got " +
                           std::to_string(options.expected_mem_mib));
  }
  if (options.expected_mem_mib > 0 && !memory_.tracked()) {
    return InvalidArgument("expected_mem_mib: " + std::to_string(options.expected_mem_mib) +
                           " MiB asked, but the dispatcher was created without gpu_memory_mib");
  }
  if (memory_.tracked() && options.expected_mem_mib > memory_.largest_mib()) {
    return InvalidArgument("expected_mem_mib: " + std::to_string(options.expected_mem_mib) +
                           " MiB fits no GPU (the largest has " +
                           std::to_string(memory_.largest_mib()) + " MiB)");
  }
  return Status::Ok();
}

StatusOr<Lease> GpuschedPolicy::Acquire(int service, const AcquireOptions& options) {
  GS_RETURN_IF_ERROR(CheckRequest(service, options));
  // A cancel wakes the wait below. Declared before the lock, so it is unsubscribed after the
  // lock is let go (the callback takes the lock).
  CancelSubscription subscription(options.cancel, [this] {
    StoreLock lock(*store_);
    if (lock.status().ok()) store_->NotifyAll();
  });
  StoreLock lock(*store_);
  GS_RETURN_IF_ERROR(lock.status());
  const int64_t requested_ns = options.requested_ns > 0 ? options.requested_ns : clock_.NowNs();
  WaitSeat seat(waiting_, *store_, waiting_.NewKey(options.priority));
  for (int attempt = 1;; ++attempt) {
    const int64_t now_ns = clock_.NowNs();
    if (shut_down_ || (options.cancel != nullptr && options.cancel->cancelled())) {
      return WaitEndedLocked(service, options, requested_ns, now_ns);
    }
    for (int g = 0; g < config_.gpu_count; ++g) AdvanceLocked(table_->gpus[g], now_ns);
    Ask ask;
    ask.cost_ms = options.expected_ms > 0 ? options.expected_ms : costs_.cost_exact_ms(service);
    ask.mem_mib = options.expected_mem_mib;
    if (!options.model.empty()) ask.model = &options.model;
    // A waiting request ahead (higher priority, or equal and earlier) goes first.
    const int gpu = waiting_.AnyAhead(seat.key()) ? -1 : PickLocked(ask);
    if (gpu >= 0) return GrantLocked(service, gpu, ask, attempt, requested_ns, now_ns);
    // No GPU may take it now: sleep until one of them, or the queue, changes.
    GS_RETURN_IF_ERROR(WaitEndedLocked(service, options, requested_ns, now_ns));
    waiting_.Add(seat.key());
    metrics_.OnGiveUp(service);
    GS_RETURN_IF_ERROR(lock.Wait(WaitSliceLocked(options, requested_ns, now_ns)));
    if (store_->ReclaimDead() > 0) store_->NotifyAll();
  }
}

void GpuschedPolicy::DropSlotLocked(const Lease& granted, Outcome outcome) {
  GpuSlots& g = table_->gpus[granted.gpu];
  AdvanceLocked(g, clock_.NowNs());
  auto mem = lease_mem_mib_.find(granted.ticket);
  if (mem != lease_mem_mib_.end()) {
    memory_.Give(granted.gpu, mem->second);
    lease_mem_mib_.erase(mem);
  }
  int i = 0;
  while (i < g.count && g.running[i].ticket != granted.ticket) ++i;
  if (i < g.count) {  // absent only if another process reclaimed it (it took us for dead)
    // The work the lease received is its run time had it run alone on this GPU: cost_time is
    // learned in fastest-GPU time (divided by the GPU's speed factor at release).
    if (outcome == Outcome::kSucceeded) {
      const RunningSlot& r = g.running[i];
      speeds_.Observe(granted.service, granted.gpu, r.received_ms);
      costs_.Observe(granted.service, r.received_ms / speeds_.factor(granted.gpu));
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
  DropSlotLocked(granted, outcome);
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
  out.free_mib = memory_.free_mib(gpu);
  out.models = affinity_.loaded(gpu);
  out.speed = speeds_.factor(gpu);
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
