#include "dispatch/realtime_dispatcher.h"

#include <unistd.h>

#include <algorithm>

#include "base/check.h"

namespace gpusched::dispatch {
namespace {

std::vector<std::string> Names(const std::vector<ServiceConfig>& services) {
  std::vector<std::string> names;
  for (const auto& s : services) names.push_back(s.name);
  return names;
}

// Each dispatcher's tickets carry its id above bit 40, so a lease of one dispatcher is never
// an outstanding ticket of another.
std::atomic<uint64_t> next_dispatcher_id{1};
constexpr int kTicketIdShift = 40;

// Holds the shared marks' lock (nothing for marks in the process). A process that died with
// it is repaired by MarkStore::Lock; any other failure is a broken segment.
class StoreLock {
 public:
  explicit StoreLock(MarkStore* store) : store_(store) {
    if (store_ == nullptr) return;
    const bool locked = store_->Lock().ok();
    GS_CHECK(locked);
  }
  ~StoreLock() {
    if (store_ != nullptr) store_->Unlock();
  }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  MarkStore* const store_;
};

}  // namespace

StatusOr<std::unique_ptr<RealtimeDispatcher>> RealtimeDispatcher::Create(
    DispatcherConfig config, Clock& clock, WorkPool* pool, std::unique_ptr<MarkStore> marks) {
  GS_RETURN_IF_ERROR(ValidateConfig(config));
  if (marks != nullptr && marks->table().gpu_count != config.gpu_count) {
    return InvalidArgument("marks: the store holds " + std::to_string(marks->table().gpu_count) +
                           " GPUs, the config " + std::to_string(config.gpu_count));
  }
  return std::unique_ptr<RealtimeDispatcher>(
      new RealtimeDispatcher(std::move(config), clock, pool, std::move(marks)));
}

RealtimeDispatcher::RealtimeDispatcher(DispatcherConfig config, Clock& clock, WorkPool* pool,
                                       std::unique_ptr<MarkStore> marks)
    : config_(std::move(config)),
      clock_(clock),
      pool_(pool),
      ticket_base_(next_dispatcher_id.fetch_add(1) << kTicketIdShift),
      shared_(std::move(marks)),
      marks_(config_.gpu_count),  // CN113051059B: every mark starts as {none, 0}
      running_(config_.gpu_count, 0),
      enabled_(config_.gpu_count, true),
      costs_(config_.services, config_.learning, config_.ema_alpha),
      metrics_(Names(config_.services), config_.gpu_count, clock.NowNs()) {}

StatusOr<int> RealtimeDispatcher::ServiceIndex(std::string_view name) const {
  for (size_t i = 0; i < config_.services.size(); ++i) {
    if (config_.services[i].name == name) return static_cast<int>(i);
  }
  return NotFound("service: no service named \"" + std::string(name) + "\"");
}

int RealtimeDispatcher::PickLocked(int service, DurationMs wait_left, TimeMs now,
                                   Decision& decision) const {
  const int n = config_.gpu_count;
  if (wait_left <= 0) {
    // CN113051059B claim 3: the budget is spent; the GPU expected to free up first, ties by
    // the lowest index. Mode A takes its lock, mode B runs beside it (see Acquire).
    decision = Decision::kGrabDirect;
    int best = -1;
    for (int g = 0; g < n; ++g) {
      if (!EligibleLocked(g)) continue;
      if (best < 0 || MarkLocked(g).fin_time < MarkLocked(best).fin_time) best = g;
    }
    if (best < 0) decision = Decision::kGiveUp;  // every GPU at its cap or out of service
    return best;
  }
  // CN113051059B claim 1: the first GPU, in scan order, whose decision is GRAB.
  const DurationMs cost = costs_.cost_ms(service);
  decision = Decision::kGiveUp;
  int chosen = -1;
  for (int g = 0; g < n; ++g) {
    if (!EligibleLocked(g)) continue;
    if (Decide(wait_left, MarkLocked(g).fin_time, now, cost) != Decision::kGrab) continue;
    if (config_.scan == ScanOrder::kIndex) {
      chosen = g;
      break;
    }
    if (chosen < 0 || MarkLocked(g).fin_time < MarkLocked(chosen).fin_time) chosen = g;
  }
  if (chosen >= 0) decision = Decision::kGrab;
  return chosen;
}

bool RealtimeDispatcher::EligibleLocked(int gpu) const {
  const int running = RunningLocked(gpu);
  if (shared_ != nullptr && running >= kMaxCoRunners) return false;  // the table's slots
  return enabled_[gpu] && (config_.max_per_gpu == 0 || running < config_.max_per_gpu);
}

SignalMark RealtimeDispatcher::MarkLocked(int gpu) const {
  if (shared_ == nullptr) return marks_[gpu];
  const GpuSlots& gs = shared_->table().gpus[gpu];
  return SignalMark{gs.mark_owner, gs.mark_fin_ms};
}

void RealtimeDispatcher::SetMarkLocked(int gpu, SignalMark mark) {
  if (shared_ == nullptr) {
    marks_[gpu] = mark;
    return;
  }
  GpuSlots& gs = shared_->table().gpus[gpu];
  gs.mark_owner = mark.owner;
  gs.mark_fin_ms = mark.fin_time;
}

int RealtimeDispatcher::RunningLocked(int gpu) const {
  return shared_ == nullptr ? running_[gpu] : shared_->table().gpus[gpu].count;
}

void RealtimeDispatcher::AddRunningLocked(int gpu, uint64_t ticket, double expected_ms) {
  if (shared_ == nullptr) {
    running_[gpu]++;
    return;
  }
  GpuSlots& gs = shared_->table().gpus[gpu];
  GS_CHECK(gs.count < kMaxCoRunners);  // EligibleLocked
  gs.running[gs.count++] =
      RunningSlot{ticket, expected_ms, 0, 0, static_cast<int32_t>(getpid()), 0};
}

void RealtimeDispatcher::DropRunningLocked(int gpu, uint64_t ticket) {
  if (shared_ == nullptr) {
    running_[gpu]--;
    return;
  }
  GpuSlots& gs = shared_->table().gpus[gpu];
  int kept = 0;  // keeps grant order
  for (int i = 0; i < gs.count; ++i) {
    if (gs.running[i].ticket != ticket) gs.running[kept++] = gs.running[i];
  }
  gs.count = kept;
}

uint64_t RealtimeDispatcher::NextTicketLocked() {
  if (shared_ != nullptr) return shared_->table().next_ticket++;  // unique across processes
  return ticket_base_ | next_ticket_.fetch_add(1, std::memory_order_relaxed);
}

std::optional<Lease> RealtimeDispatcher::TryAcquire(int service, DurationMs wait_left) {
  GS_CHECK(service >= 0 && service < static_cast<int>(config_.services.size()));
  const int64_t now_ns = clock_.NowNs();
  const TimeMs now = now_ns / 1'000'000;
  std::lock_guard lock(mu_);
  if (shut_down_.load()) return std::nullopt;
  StoreLock store_lock(shared_.get());
  const uint64_t ticket = NextTicketLocked();
  Decision decision;
  int gpu = PickLocked(service, wait_left, now, decision);
  // Shared marks: leases of processes that died hold GPUs nobody will release; drop them.
  if (gpu < 0 && shared_ != nullptr && shared_->ReclaimDead() > 0) {
    gpu = PickLocked(service, wait_left, now, decision);
  }
  if (config_.on_decision) {
    config_.on_decision({service, ticket, now, wait_left, decision, gpu});
  }
  if (gpu < 0) {
    metrics_.OnGiveUp(service);
    return std::nullopt;
  }
  Lease lease;
  lease.gpu = gpu;
  lease.service = service;
  lease.ticket = ticket;
  lease.requested_ns = now_ns;
  lease.granted_ns = now_ns;
  lease.attempts = 1;
  lease.locked = !(decision == Decision::kGrabDirect && config_.direct == DirectMode::kNoLock);
  if (lease.locked) {
    // CN113051059B claim 4: lock = this task, fin_time = now + cost_time.
    SignalMark m = MarkLocked(gpu);
    const TimeMs fin = now + costs_.cost_ms(service);
    m.owner = ticket;
    m.fin_time = config_.fin_update == FinTimeUpdate::kMax ? std::max(m.fin_time, fin) : fin;
    SetMarkLocked(gpu, m);
  }
  metrics_.OnGrant(service, gpu, decision == Decision::kGrabDirect, now_ns);
  AddRunningLocked(gpu, ticket, costs_.cost_exact_ms(service));
  leases_[ticket] = lease;
  return lease;
}

StatusOr<Lease> RealtimeDispatcher::Acquire(int service, const AcquireOptions& options) {
  if (service < 0 || service >= static_cast<int>(config_.services.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  const ServiceConfig& s = config_.services[service];
  const int64_t requested_ns = options.requested_ns > 0 ? options.requested_ns : clock_.NowNs();
  // A cancel wakes the wait between rounds (taking mu_ first, so no wake-up is lost).
  CancelSubscription subscription(options.cancel, [this] {
    std::lock_guard lock(mu_);
    wake_.notify_all();
  });
  DurationMs wait_left = s.wait_time;
  for (int attempt = 1;; ++attempt) {
    if (shut_down_.load()) return FailedPrecondition("acquire: the dispatcher is shutting down");
    if (options.cancel != nullptr && options.cancel->cancelled()) {
      return Unavailable("acquire: cancelled");
    }
    if (std::optional<Lease> lease = TryAcquire(service, wait_left)) {
      lease->requested_ns = requested_ns;
      lease->attempts = attempt;
      std::lock_guard lock(mu_);
      leases_[lease->ticket].requested_ns = requested_ns;
      return *lease;
    }
    const int64_t now_ns = clock_.NowNs();
    if (config_.acquire_timeout > 0 &&
        now_ns - requested_ns >= config_.acquire_timeout * 1'000'000) {
      return TimeoutError(service);
    }
    if (options.deadline_ns > 0 && now_ns >= options.deadline_ns) {
      return Unavailable("acquire: deadline passed");
    }
    // CN113051059B claim 2: give up, wait try_time, try again with a smaller budget. With a
    // cancel token the wait ends early on cancel or shutdown; a release never ends it (the
    // patent's retry period).
    DurationMs sleep_ms = s.try_time;
    if (options.deadline_ns > 0) {
      sleep_ms = std::min<DurationMs>(sleep_ms, (options.deadline_ns - now_ns + 999'999) / 1'000'000);
    }
    if (options.cancel == nullptr) {
      clock_.SleepMs(sleep_ms);  // as before: shutdown is seen at the next round
    } else {
      std::unique_lock lock(mu_);
      clock_.WaitFor(lock, wake_, sleep_ms, [&] {
        return shut_down_.load() || options.cancel->cancelled();
      });
    }
    if (config_.budget == WaitBudget::kSubtractTryTime) {
      wait_left -= s.try_time;
    } else {
      wait_left = s.wait_time - (clock_.NowNs() - requested_ns) / 1'000'000;
    }
  }
}

Status RealtimeDispatcher::TimeoutError(int service) const {
  std::lock_guard lock(mu_);
  StoreLock store_lock(shared_.get());
  int disabled = 0, full = 0;
  for (int g = 0; g < config_.gpu_count; ++g) {
    if (!enabled_[g]) {
      disabled++;
    } else if (!EligibleLocked(g)) {
      full++;
    }
  }
  return Unavailable("acquire: no GPU granted to service \"" + config_.services[service].name +
                     "\" within acquire_timeout " + std::to_string(config_.acquire_timeout) +
                     " ms (" + std::to_string(full) + " of " + std::to_string(config_.gpu_count) +
                     " GPUs at max_per_gpu " + std::to_string(config_.max_per_gpu) + ", " +
                     std::to_string(disabled) + " out of service)");
}

Status RealtimeDispatcher::Release(const Lease& lease, Outcome outcome) {
  const int64_t now_ns = clock_.NowNs();
  std::lock_guard lock(mu_);
  auto it = leases_.find(lease.ticket);
  if (it == leases_.end()) {
    return NotFound("lease: ticket " + std::to_string(lease.ticket) +
                    " is not outstanding on this dispatcher (released already, never granted, "
                    "or another dispatcher's)");
  }
  const Lease granted = it->second;
  GS_RETURN_IF_ERROR(CheckReleaseMatchesGrant(granted, lease));
  leases_.erase(it);
  const double run_ms = static_cast<double>(now_ns - granted.granted_ns) / 1e6;
  const double queue_ms = static_cast<double>(granted.granted_ns - granted.requested_ns) / 1e6;
  {
    StoreLock store_lock(shared_.get());
    DropRunningLocked(granted.gpu, granted.ticket);
    // CN113051059B claim 5: the finishing task resets the mark. Owner-checked by default, so
    // a co-runner that finishes first (here or, with shared marks, in another process)
    // cannot clear a newer owner's lock and fin_time.
    if (config_.release == ReleaseMode::kLiteral ||
        MarkLocked(granted.gpu).owner == granted.ticket) {
      SetMarkLocked(granted.gpu, SignalMark{0, now_ns / 1'000'000});
    }
  }
  if (outcome == Outcome::kSucceeded) {
    costs_.Observe(granted.service, run_ms);  // CN113051059B claim 6
  } else {
    metrics_.OnFailed(granted.service);  // a failure says nothing about the cost
  }
  metrics_.OnComplete(granted.service, granted.gpu, queue_ms, run_ms, now_ns);
  return Status::Ok();
}

Status RealtimeDispatcher::SetGpuEnabled(int gpu, bool enabled) {
  if (gpu < 0 || gpu >= config_.gpu_count) {
    return InvalidArgument("gpu: " + std::to_string(gpu) + " out of range [0, " +
                           std::to_string(config_.gpu_count) + ")");
  }
  std::lock_guard lock(mu_);
  enabled_[gpu] = enabled;
  return Status::Ok();
}

bool RealtimeDispatcher::gpu_enabled(int gpu) const {
  std::lock_guard lock(mu_);
  return enabled_[gpu];
}

void RealtimeDispatcher::Shutdown(bool stop) {
  std::lock_guard lock(mu_);
  shut_down_.store(stop);
  wake_.notify_all();
}

int RealtimeDispatcher::outstanding() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(leases_.size());
}

SignalMark RealtimeDispatcher::mark(int gpu) const {
  std::lock_guard lock(mu_);
  StoreLock store_lock(shared_.get());
  return MarkLocked(gpu);
}

DurationMs RealtimeDispatcher::cost_time(int service) const {
  std::lock_guard lock(mu_);
  return costs_.cost_ms(service);
}

std::vector<double> RealtimeDispatcher::CostsLocked() const {
  std::vector<double> costs;
  for (size_t i = 0; i < config_.services.size(); ++i) {
    costs.push_back(costs_.cost_exact_ms(static_cast<int>(i)));
  }
  return costs;
}

DispatchMetrics RealtimeDispatcher::Metrics() const {
  const int64_t now_ns = clock_.NowNs();
  std::lock_guard lock(mu_);
  return metrics_.Snapshot(now_ns, CostsLocked());
}

}  // namespace gpusched::dispatch
