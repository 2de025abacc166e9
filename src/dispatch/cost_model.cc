#include "dispatch/cost_model.h"

#include <cmath>

namespace gpusched::dispatch {

CostModel::CostModel(const std::vector<ServiceConfig>& services, CostLearning learning,
                     double ema_alpha)
    : learning_(learning), alpha_(ema_alpha), entries_(services.size()) {
  for (size_t i = 0; i < services.size(); ++i) {
    entries_[i].cost = services[i].cost_time;
  }
}

DurationMs CostModel::cost_ms(int service) const {
  return static_cast<DurationMs>(std::llround(entries_[service].cost));
}

void CostModel::Observe(int service, double duration_ms) {
  Entry& e = entries_[service];
  e.sum += duration_ms;
  ++e.n;
  switch (learning_) {
    case CostLearning::kCumulativeMean:
      // CN113051059B claim 6 [choice]: the configured default counts until the first real
      // observation, then only observations do.
      e.cost = e.sum / static_cast<double>(e.n);
      break;
    case CostLearning::kEma:
      e.cost = alpha_ * duration_ms + (1 - alpha_) * e.cost;
      break;
    case CostLearning::kOffline:
      break;  // the offline-measured value stands
  }
}

}  // namespace gpusched::dispatch
