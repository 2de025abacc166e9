#include "dispatch/baseline_policies.h"

#include <algorithm>

#include "base/check.h"

namespace gpusched::dispatch {

BaselinePolicy::BaselinePolicy(BaselineKind kind, int gpu_count,
                               std::vector<ServiceConfig> services, Clock& clock, Rng* rng)
    : kind_(kind),
      services_(std::move(services)),
      clock_(clock),
      rng_(rng),
      running_(static_cast<size_t>(gpu_count)),
      costs_(services_, CostLearning::kCumulativeMean, 0.2) {
  GS_CHECK(gpu_count >= 1);
  GS_CHECK(kind != BaselineKind::kRandom || rng != nullptr);
}

std::string_view BaselinePolicy::name() const {
  switch (kind_) {
    case BaselineKind::kRoundRobin: return "round-robin";
    case BaselineKind::kRandom: return "random";
    case BaselineKind::kJoinShortestQueue: return "jsq";
    case BaselineKind::kLeastExpectedFinish: return "left";
  }
  return "?";
}

StatusOr<int> BaselinePolicy::ServiceIndex(std::string_view name) const {
  for (size_t i = 0; i < services_.size(); ++i) {
    if (services_[i].name == name) return static_cast<int>(i);
  }
  return NotFound("service: no service named \"" + std::string(name) + "\"");
}

int BaselinePolicy::PickLocked(int service, int64_t now_ns) {
  const int n = gpu_count();
  switch (kind_) {
    case BaselineKind::kRoundRobin: {
      const int g = next_rr_;
      next_rr_ = (next_rr_ + 1) % n;
      return g;
    }
    case BaselineKind::kRandom:
      return static_cast<int>(rng_->UniformInt(0, n - 1));
    case BaselineKind::kJoinShortestQueue: {
      int best = 0;
      for (int g = 1; g < n; ++g) {
        if (running_[g].size() < running_[best].size()) best = g;
      }
      return best;
    }
    case BaselineKind::kLeastExpectedFinish: {
      int best = -1;
      double best_work = 0;
      const double mine = costs_.cost_exact_ms(service);
      for (int g = 0; g < n; ++g) {
        double work = mine;
        for (const Running& r : running_[g]) {
          work += std::max(0.0, r.cost_ms - static_cast<double>(now_ns - r.start_ns) / 1e6);
        }
        if (best < 0 || work < best_work) {
          best = g;
          best_work = work;
        }
      }
      return best;
    }
  }
  return 0;
}

StatusOr<Lease> BaselinePolicy::Acquire(int service) {
  if (service < 0 || service >= static_cast<int>(services_.size())) {
    return InvalidArgument("service: index " + std::to_string(service) + " out of range");
  }
  const int64_t now_ns = clock_.NowNs();
  std::lock_guard lock(mu_);
  Lease lease;
  lease.gpu = PickLocked(service, now_ns);
  lease.service = service;
  lease.ticket = next_ticket_++;
  lease.attempts = 1;
  lease.requested_ns = lease.granted_ns = now_ns;
  running_[lease.gpu].push_back({lease.ticket, now_ns, costs_.cost_exact_ms(service)});
  return lease;
}

void BaselinePolicy::Complete(const Lease& lease) {
  const double run_ms = static_cast<double>(clock_.NowNs() - lease.granted_ns) / 1e6;
  std::lock_guard lock(mu_);
  auto& r = running_[lease.gpu];
  r.erase(std::find_if(r.begin(), r.end(),
                       [&](const Running& x) { return x.ticket == lease.ticket; }));
  costs_.Observe(lease.service, run_ms);
}

}  // namespace gpusched::dispatch
