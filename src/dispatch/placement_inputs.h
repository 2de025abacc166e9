#pragma once
// What the gpusched policy knows of a request besides its run time (issue 42, item 5): the GPU
// memory it needs, the model it serves, its priority, and how fast each GPU runs.
//
//   GpuMemoryLedger  each GPU's memory (given at create) minus the expected memory of the
//                    leases out on it; a request is granted only a GPU where it fits.
//   ModelAffinity    the models each GPU has loaded: a model is recorded on a GPU when a lease
//                    of it is granted there; at most `capacity` per GPU, least recently
//                    granted dropped first (an LRU).
//   SpeedFactors     a time multiplier per GPU (1 = the fastest GPU observed), learned from the
//                    work leases received (below), seeded at create.
//   WaitQueue        waiting requests ordered by (priority desc, arrival asc).
//
// Speed learning (deterministic: no randomness, no clock): for each (service, GPU) the policy
// keeps the mean of log(run time alone) of the succeeded leases released there. A GPU's factor
// is exp of the mean, over the services that ran >= kSpeedMinRuns times on it and on at least
// one other GPU, of (its mean log run time - the least such mean of that service on any GPU),
// so a GPU that runs the same service 2x slower than the fastest gets 2. A GPU with no such
// service keeps its seed (seed / least seed; 1 when none was given). Services' costs are then
// learned in fastest-GPU time (the run time divided by its GPU's factor at release).
//
// Thread-safety: none; the policy calls these under its store's lock.

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpusched::dispatch {

inline constexpr int kSpeedMinRuns = 3;

class GpuMemoryLedger {
 public:
  // `total_mib` per GPU; empty: memory is not tracked and every request must ask for 0.
  explicit GpuMemoryLedger(std::vector<int64_t> total_mib);
  bool tracked() const { return !total_.empty(); }
  int64_t largest_mib() const;
  // -1 when not tracked.
  int64_t free_mib(int gpu) const;
  bool Fits(int gpu, int64_t mib) const { return !tracked() || mib <= free_mib(gpu); }
  void Take(int gpu, int64_t mib);
  void Give(int gpu, int64_t mib);

 private:
  std::vector<int64_t> total_;
  std::vector<int64_t> used_;
};

class ModelAffinity {
 public:
  ModelAffinity(int gpu_count, int capacity) : capacity_(capacity), loaded_(gpu_count) {}
  bool Has(int gpu, const std::string& model) const;
  // Records `model` as the most recently used on `gpu`, dropping the least recent beyond
  // capacity. "" is no model: ignored.
  void Touch(int gpu, const std::string& model);
  // Most recent first.
  const std::vector<std::string>& loaded(int gpu) const { return loaded_[gpu]; }

 private:
  int capacity_;
  std::vector<std::vector<std::string>> loaded_;
};

class SpeedFactors {
 public:
  // `seed` empty or one factor per GPU (> 0).
  SpeedFactors(int gpu_count, int service_count, std::vector<double> seed, bool learn);
  double factor(int gpu) const { return factors_[gpu]; }
  // One succeeded lease of `service` that received `run_ms` of work on `gpu`.
  void Observe(int service, int gpu, double run_ms);

 private:
  void Recompute();
  struct Runs {
    uint64_t n = 0;
    double sum_log = 0;
  };
  const int gpu_count_;
  const bool learn_;
  std::vector<double> seed_;
  std::vector<std::vector<Runs>> runs_;  // [service][gpu]
  std::vector<double> factors_;
};

// Keys order waiting requests: higher priority first, then earlier arrival.
class WaitQueue {
 public:
  using Key = std::pair<int64_t, uint64_t>;  // (-priority, arrival number)
  Key NewKey(int32_t priority) { return {-static_cast<int64_t>(priority), ++arrivals_}; }
  // Whether a waiting request comes before `key`.
  bool AnyAhead(const Key& key) const { return !waiting_.empty() && *waiting_.begin() < key; }
  void Add(const Key& key) { waiting_.insert(key); }
  // True when `key` was waiting.
  bool Remove(const Key& key) { return waiting_.erase(key) > 0; }
  size_t size() const { return waiting_.size(); }

 private:
  uint64_t arrivals_ = 0;
  std::set<Key> waiting_;
};

}  // namespace gpusched::dispatch
