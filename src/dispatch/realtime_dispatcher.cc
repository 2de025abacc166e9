#include "dispatch/realtime_dispatcher.h"

#include <algorithm>

#include "base/check.h"

namespace gpusched::dispatch {
namespace {

std::vector<std::string> Names(const std::vector<ServiceConfig>& services) {
  std::vector<std::string> names;
  for (const auto& s : services) names.push_back(s.name);
  return names;
}

}  // namespace

StatusOr<std::unique_ptr<RealtimeDispatcher>> RealtimeDispatcher::Create(DispatcherConfig config,
                                                                         Clock& clock,
                                                                         WorkPool* pool) {
  GS_RETURN_IF_ERROR(ValidateConfig(config));
  return std::unique_ptr<RealtimeDispatcher>(
      new RealtimeDispatcher(std::move(config), clock, pool));
}

RealtimeDispatcher::RealtimeDispatcher(DispatcherConfig config, Clock& clock, WorkPool* pool)
    : config_(std::move(config)),
      clock_(clock),
      pool_(pool),
      marks_(config_.gpu_count),  // CN113051059B: every mark starts as {none, 0}
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
    int best = 0;
    for (int g = 1; g < n; ++g) {
      if (marks_[g].fin_time < marks_[best].fin_time) best = g;
    }
    return best;
  }
  // CN113051059B claim 1: the first GPU, in scan order, whose decision is GRAB.
  const DurationMs cost = costs_.cost_ms(service);
  decision = Decision::kGiveUp;
  int chosen = -1;
  for (int g = 0; g < n; ++g) {
    if (Decide(wait_left, marks_[g].fin_time, now, cost) != Decision::kGrab) continue;
    if (config_.scan == ScanOrder::kIndex) {
      chosen = g;
      break;
    }
    if (chosen < 0 || marks_[g].fin_time < marks_[chosen].fin_time) chosen = g;
  }
  if (chosen >= 0) decision = Decision::kGrab;
  return chosen;
}

std::optional<Lease> RealtimeDispatcher::TryAcquire(int service, DurationMs wait_left) {
  GS_CHECK(service >= 0 && service < static_cast<int>(config_.services.size()));
  const uint64_t ticket = next_ticket_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now_ns = clock_.NowNs();
  const TimeMs now = now_ns / 1'000'000;
  std::lock_guard lock(mu_);
  Decision decision;
  const int gpu = PickLocked(service, wait_left, now, decision);
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
    SignalMark& m = marks_[gpu];
    const TimeMs fin = now + costs_.cost_ms(service);
    m.owner = ticket;
    m.fin_time = config_.fin_update == FinTimeUpdate::kMax ? std::max(m.fin_time, fin) : fin;
  }
  metrics_.OnGrant(service, gpu, decision == Decision::kGrabDirect, now_ns);
  return lease;
}

StatusOr<Lease> RealtimeDispatcher::Acquire(int service) {
  if (service < 0 || service >= static_cast<int>(config_.services.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  const ServiceConfig& s = config_.services[service];
  const int64_t requested_ns = clock_.NowNs();
  DurationMs wait_left = s.wait_time;
  for (int attempt = 1;; ++attempt) {
    if (std::optional<Lease> lease = TryAcquire(service, wait_left)) {
      lease->requested_ns = requested_ns;
      lease->attempts = attempt;
      return *lease;
    }
    // CN113051059B claim 2: give up, wait try_time, try again with a smaller budget.
    clock_.SleepMs(s.try_time);
    if (config_.budget == WaitBudget::kSubtractTryTime) {
      wait_left -= s.try_time;
    } else {
      wait_left = s.wait_time - (clock_.NowNs() - requested_ns) / 1'000'000;
    }
  }
}

void RealtimeDispatcher::Complete(const Lease& lease) {
  const int64_t now_ns = clock_.NowNs();
  const double run_ms = static_cast<double>(now_ns - lease.granted_ns) / 1e6;
  const double queue_ms = static_cast<double>(lease.granted_ns - lease.requested_ns) / 1e6;
  std::lock_guard lock(mu_);
  SignalMark& m = marks_[lease.gpu];
  // CN113051059B claim 5: the finishing task resets the mark. Owner-checked by default, so a
  // co-runner that finishes first cannot clear a newer owner's lock and fin_time.
  if (config_.release == ReleaseMode::kLiteral || m.owner == lease.ticket) {
    m.fin_time = now_ns / 1'000'000;
    m.owner = 0;
  }
  costs_.Observe(lease.service, run_ms);  // CN113051059B claim 6
  metrics_.OnComplete(lease.service, lease.gpu, queue_ms, run_ms, now_ns);
}

SignalMark RealtimeDispatcher::mark(int gpu) const {
  std::lock_guard lock(mu_);
  return marks_[gpu];
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
