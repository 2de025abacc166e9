#include "dispatch/placement_inputs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpusched::dispatch {

GpuMemoryLedger::GpuMemoryLedger(std::vector<int64_t> total_mib)
    : total_(std::move(total_mib)), used_(total_.size(), 0) {}

int64_t GpuMemoryLedger::largest_mib() const {
  return total_.empty() ? -1 : *std::max_element(total_.begin(), total_.end());
}

int64_t GpuMemoryLedger::free_mib(int gpu) const {
  return tracked() ? total_[gpu] - used_[gpu] : -1;
}

void GpuMemoryLedger::Take(int gpu, int64_t mib) {
  if (tracked()) used_[gpu] += mib;
}

void GpuMemoryLedger::Give(int gpu, int64_t mib) {
  if (tracked()) used_[gpu] = std::max<int64_t>(0, used_[gpu] - mib);
}

bool ModelAffinity::Has(int gpu, const std::string& model) const {
  if (model.empty()) return false;
  const auto& l = loaded_[gpu];
  return std::find(l.begin(), l.end(), model) != l.end();
}

void ModelAffinity::Touch(int gpu, const std::string& model) {
  if (model.empty() || capacity_ <= 0) return;
  auto& l = loaded_[gpu];
  auto it = std::find(l.begin(), l.end(), model);
  if (it != l.end()) l.erase(it);
  l.insert(l.begin(), model);
  if (static_cast<int>(l.size()) > capacity_) l.resize(static_cast<size_t>(capacity_));
}

SpeedFactors::SpeedFactors(int gpu_count, int service_count, std::vector<double> seed,
                           bool learn)
    : gpu_count_(gpu_count),
      learn_(learn),
      seed_(std::move(seed)),
      runs_(static_cast<size_t>(service_count), std::vector<Runs>(static_cast<size_t>(gpu_count))),
      factors_(static_cast<size_t>(gpu_count), 1.0) {
  if (!seed_.empty()) {
    const double least = *std::min_element(seed_.begin(), seed_.end());
    for (double& s : seed_) s /= least;
  } else {
    seed_.assign(static_cast<size_t>(gpu_count), 1.0);
  }
  factors_ = seed_;
}

void SpeedFactors::Observe(int service, int gpu, double run_ms) {
  if (!learn_ || !(run_ms > 0)) return;
  Runs& r = runs_[service][gpu];
  r.n++;
  r.sum_log += std::log(run_ms);
  Recompute();
}

void SpeedFactors::Recompute() {
  std::vector<double> sum(static_cast<size_t>(gpu_count_), 0.0);
  std::vector<int> services(static_cast<size_t>(gpu_count_), 0);
  for (const std::vector<Runs>& per_gpu : runs_) {
    int seen = 0;
    double least = std::numeric_limits<double>::infinity();
    for (const Runs& r : per_gpu) {
      if (r.n < kSpeedMinRuns) continue;
      seen++;
      least = std::min(least, r.sum_log / static_cast<double>(r.n));
    }
    if (seen < 2) continue;  // a service seen on one GPU says nothing of relative speed
    for (int g = 0; g < gpu_count_; ++g) {
      const Runs& r = per_gpu[g];
      if (r.n < kSpeedMinRuns) continue;
      sum[g] += r.sum_log / static_cast<double>(r.n) - least;
      services[g]++;
    }
  }
  for (int g = 0; g < gpu_count_; ++g) {
    factors_[g] = services[g] > 0 ? std::exp(sum[g] / services[g]) : seed_[g];
  }
}

}  // namespace gpusched::dispatch
