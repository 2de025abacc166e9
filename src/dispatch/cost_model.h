#pragma once
// CostModel: each service's expected run time (cost_time), learned from observed durations
// (CN113051059B claim 6). Shared by the patent dispatcher and the baselines that need an
// expected cost, so every policy sees the same estimate.
//
// Thread-safety: none; the owner serialises calls (the dispatchers call it under their lock).

#include <vector>

#include "dispatch/realtime_config.h"

namespace gpusched::dispatch {

class CostModel {
 public:
  CostModel(const std::vector<ServiceConfig>& services, CostLearning learning, double ema_alpha);

  // The current estimate in ms, rounded to the nearest ms (marks are integer ms).
  DurationMs cost_ms(int service) const;
  double cost_exact_ms(int service) const { return entries_[service].cost; }
  // Records one observed run time of `service` in ms.
  void Observe(int service, double duration_ms);
  uint64_t observations(int service) const { return entries_[service].n; }

 private:
  struct Entry {
    double cost = 0;
    double sum = 0;
    uint64_t n = 0;
  };
  const CostLearning learning_;
  const double alpha_;
  std::vector<Entry> entries_;
};

}  // namespace gpusched::dispatch
