#include "dispatch/gpusched_policy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <set>

#include "base/check.h"

namespace gpusched::dispatch {
namespace {

// Tickets carry the policy's id above bit 40 and bit 63 set, so they never match a ticket of
// another GpuschedPolicy or of a RealtimeDispatcher.
std::atomic<uint64_t> next_policy_id{1};
constexpr int kTicketIdShift = 40;
constexpr uint64_t kGpuschedTicketBit = uint64_t{1} << 63;

// Without acquire_timeout a blocked Acquire still re-checks this often (a lost wake-up costs
// at most this much).
constexpr DurationMs kWaitSliceMs = 1000;

}  // namespace

Status ValidateGpuschedConfig(const GpuschedConfig& config) {
  if (config.gpu_count < 1) {
    return InvalidArgument("gpu_count: must be >= 1, got " + std::to_string(config.gpu_count));
  }
  if (config.services.empty()) return InvalidArgument("services: at least one is required");
  if (config.learning == CostLearning::kEma && !(config.ema_alpha > 0 && config.ema_alpha <= 1)) {
    return InvalidArgument("ema_alpha: must be in (0, 1], got " +
                           std::to_string(config.ema_alpha));
  }
  if (config.max_per_gpu < 0) {
    return InvalidArgument("max_per_gpu: must be >= 0 (0: no cap), got " +
                           std::to_string(config.max_per_gpu));
  }
  if (config.acquire_timeout < 0) {
    return InvalidArgument("acquire_timeout: must be >= 0 ms (0: none), got " +
                           std::to_string(config.acquire_timeout));
  }
  if (!(config.min_remaining_fraction >= 0 && config.min_remaining_fraction <= 1)) {
    return InvalidArgument("min_remaining_fraction: must be in [0, 1], got " +
                           std::to_string(config.min_remaining_fraction));
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

StatusOr<std::unique_ptr<GpuschedPolicy>> GpuschedPolicy::Create(GpuschedConfig config,
                                                                 Clock& clock) {
  GS_RETURN_IF_ERROR(ValidateGpuschedConfig(config));
  return std::unique_ptr<GpuschedPolicy>(new GpuschedPolicy(std::move(config), clock));
}

GpuschedPolicy::GpuschedPolicy(GpuschedConfig config, Clock& clock)
    : config_(std::move(config)),
      clock_(clock),
      ticket_base_(kGpuschedTicketBit | (next_policy_id.fetch_add(1) << kTicketIdShift)),
      gpus_(static_cast<size_t>(config_.gpu_count)),
      costs_(config_.services, config_.learning, config_.ema_alpha) {
  const int64_t now_ns = clock_.NowNs();
  for (Gpu& g : gpus_) g.updated_ns = now_ns;
}

StatusOr<int> GpuschedPolicy::ServiceIndex(std::string_view name) const {
  for (size_t i = 0; i < config_.services.size(); ++i) {
    if (config_.services[i].name == name) return static_cast<int>(i);
  }
  return NotFound("service: no service named \"" + std::string(name) + "\"");
}

void GpuschedPolicy::AdvanceLocked(Gpu& g, int64_t now_ns) {
  if (now_ns <= g.updated_ns) return;
  if (!g.running.empty()) {
    const double share_ms =
        static_cast<double>(now_ns - g.updated_ns) / 1e6 / static_cast<double>(g.running.size());
    for (Running& r : g.running) r.received_ms += share_ms;
  }
  g.updated_ns = now_ns;
}

double GpuschedPolicy::RemainingLocked(const Running& r, double extra_ms) const {
  const double cost = costs_.cost_exact_ms(r.service);
  return std::max(cost - r.received_ms - extra_ms, config_.min_remaining_fraction * cost);
}

bool GpuschedPolicy::EligibleLocked(int gpu) const {
  const Gpu& g = gpus_[gpu];
  return g.enabled && (config_.max_per_gpu == 0 ||
                       static_cast<int>(g.running.size()) < config_.max_per_gpu);
}

int GpuschedPolicy::PickLocked(double cost_ms) const {
  int best = -1;
  double best_slowdown = 0;
  for (int gpu = 0; gpu < config_.gpu_count; ++gpu) {
    if (!EligibleLocked(gpu)) continue;
    // Under processor sharing the request and a co-runner slow each other down by as long as
    // both run: m = min(remaining, cost). Relative to each one's cost, that is the slowdown the
    // grant adds (the co-runners' weighted). Strict < keeps the lowest index on a tie.
    double slowdown = 0;
    for (const Running& r : gpus_[gpu].running) {
      const double m = std::min(RemainingLocked(r, 0), cost_ms);
      slowdown += m / cost_ms + config_.co_runner_weight * m / costs_.cost_exact_ms(r.service);
    }
    if (best < 0 || slowdown < best_slowdown) {
      best = gpu;
      best_slowdown = slowdown;
    }
  }
  return best;
}

StatusOr<Lease> GpuschedPolicy::Acquire(int service) {
  if (service < 0 || service >= static_cast<int>(config_.services.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  std::unique_lock lock(mu_);
  const int64_t requested_ns = clock_.NowNs();
  for (int attempt = 1;; ++attempt) {
    if (shut_down_) return FailedPrecondition("acquire: the policy is shutting down");
    const int64_t now_ns = clock_.NowNs();
    for (Gpu& g : gpus_) AdvanceLocked(g, now_ns);
    const int gpu = PickLocked(costs_.cost_exact_ms(service));
    if (gpu >= 0) {
      Lease lease;
      lease.gpu = gpu;
      lease.service = service;
      lease.ticket = ticket_base_ | next_ticket_++;
      lease.attempts = attempt;
      lease.requested_ns = requested_ns;
      lease.granted_ns = now_ns;
      gpus_[gpu].running.push_back({lease.ticket, service, 0.0});
      leases_[lease.ticket] = lease;
      return lease;
    }
    // Every GPU is out of service or at max_per_gpu: sleep until one of them changes.
    DurationMs wait_ms = kWaitSliceMs;
    if (config_.acquire_timeout > 0) {
      const int64_t left_ns = requested_ns + config_.acquire_timeout * 1'000'000 - now_ns;
      if (left_ns <= 0) {
        return Unavailable("acquire: no GPU granted to service \"" +
                           config_.services[service].name + "\" within acquire_timeout " +
                           std::to_string(config_.acquire_timeout) +
                           " ms (every GPU at max_per_gpu " +
                           std::to_string(config_.max_per_gpu) + " or out of service)");
      }
      wait_ms = std::min<DurationMs>(wait_ms, (left_ns + 999'999) / 1'000'000);
    }
    clock_.WaitFor(lock, released_, wait_ms, [&] {
      if (shut_down_) return true;
      for (int g = 0; g < config_.gpu_count; ++g) {
        if (EligibleLocked(g)) return true;
      }
      return false;
    });
  }
}

Status GpuschedPolicy::Release(const Lease& lease, Outcome outcome) {
  {
    std::lock_guard lock(mu_);
    auto it = leases_.find(lease.ticket);
    if (it == leases_.end()) {
      return NotFound("lease: ticket " + std::to_string(lease.ticket) +
                      " is not outstanding on this policy (released already, never granted, "
                      "or another policy's)");
    }
    const Lease granted = it->second;
    if (granted.gpu != lease.gpu || granted.service != lease.service) {
      return InvalidArgument("lease: gpu " + std::to_string(lease.gpu) + " / service " +
                             std::to_string(lease.service) + " do not match ticket " +
                             std::to_string(lease.ticket) + " (granted gpu " +
                             std::to_string(granted.gpu) + ", service " +
                             std::to_string(granted.service) + ")");
    }
    leases_.erase(it);
    Gpu& g = gpus_[granted.gpu];
    AdvanceLocked(g, clock_.NowNs());
    auto r = std::find_if(g.running.begin(), g.running.end(),
                          [&](const Running& x) { return x.ticket == granted.ticket; });
    GS_CHECK(r != g.running.end());
    // The work the lease received is its run time had it run alone: what cost_time means.
    if (outcome == Outcome::kSucceeded) costs_.Observe(granted.service, r->received_ms);
    g.running.erase(r);
  }
  released_.notify_all();
  return Status::Ok();
}

Status GpuschedPolicy::SetGpuEnabled(int gpu, bool enabled) {
  if (gpu < 0 || gpu >= config_.gpu_count) {
    return InvalidArgument("gpu: " + std::to_string(gpu) + " out of range [0, " +
                           std::to_string(config_.gpu_count) + ")");
  }
  {
    std::lock_guard lock(mu_);
    gpus_[gpu].enabled = enabled;
  }
  released_.notify_all();
  return Status::Ok();
}

void GpuschedPolicy::Shutdown(bool stop) {
  {
    std::lock_guard lock(mu_);
    shut_down_ = stop;
  }
  released_.notify_all();
}

GpuLoad GpuschedPolicy::LoadLocked(int gpu, int64_t now_ns) const {
  const Gpu& g = gpus_[gpu];
  const size_t k = g.running.size();
  const double now_ms = static_cast<double>(now_ns) / 1e6;
  GpuLoad out;
  out.co_runners = static_cast<int>(k);
  out.mark.fin_time = static_cast<TimeMs>(std::llround(now_ms));
  if (k == 0) return out;
  // Work each lease still needs, as of now (not yet folded into received_ms).
  const double extra_ms =
      static_cast<double>(std::max<int64_t>(0, now_ns - g.updated_ns)) / 1e6 / static_cast<double>(k);
  std::vector<double> left(k);
  for (size_t i = 0; i < k; ++i) left[i] = RemainingLocked(g.running[i], extra_ms);
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
  std::lock_guard lock(mu_);
  return LoadLocked(gpu, clock_.NowNs());
}

double GpuschedPolicy::cost_time_ms(int service) const {
  std::lock_guard lock(mu_);
  return costs_.cost_exact_ms(service);
}

int GpuschedPolicy::outstanding() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(leases_.size());
}

}  // namespace gpusched::dispatch
