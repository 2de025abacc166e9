#pragma once
// The policies the benchmark compares CN113051059B with. None of them waits: each grants a
// GPU at once, so queueing happens on the GPU (co-running work shares it).
//   round-robin                 GPUs in turn.
//   random                      uniform over the GPUs (seeded Rng).
//   join-shortest-queue         fewest running leases, ties by lowest index.
//   least-expected-finish-time  least expected remaining work: for each running lease,
//                               max(cost - elapsed, 0) summed, plus this request's cost; costs
//                               are learned like the patent's (CostModel, cumulative mean).
//
// Thread-safety: safe for many threads (one mutex each).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "dispatch/cost_model.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/realtime_config.h"

namespace gpusched::dispatch {

enum class BaselineKind { kRoundRobin, kRandom, kJoinShortestQueue, kLeastExpectedFinish };

class BaselinePolicy final : public DispatchPolicy {
 public:
  // `clock` (and `rng` for kRandom) must outlive the policy. REQUIRES: gpu_count >= 1.
  BaselinePolicy(BaselineKind kind, int gpu_count, std::vector<ServiceConfig> services,
                 Clock& clock, Rng* rng = nullptr);

  std::string_view name() const override;
  int gpu_count() const override { return static_cast<int>(running_.size()); }
  StatusOr<int> ServiceIndex(std::string_view name) const override;
  StatusOr<Lease> Acquire(int service) override;
  void Complete(const Lease& lease) override;

 private:
  struct Running {
    uint64_t ticket;
    int64_t start_ns;
    double cost_ms;
  };
  int PickLocked(int service, int64_t now_ns);

  const BaselineKind kind_;
  const std::vector<ServiceConfig> services_;
  Clock& clock_;
  Rng* const rng_;

  std::mutex mu_;
  uint64_t next_ticket_ = 1;
  int next_rr_ = 0;
  std::vector<std::vector<Running>> running_;  // per GPU
  CostModel costs_;
};

}  // namespace gpusched::dispatch
