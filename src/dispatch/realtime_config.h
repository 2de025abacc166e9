#pragma once
// Configuration of the CN113051059B real-time dispatcher (PATENTS.md section 1). Every
// interpretation the claims leave open is an option here; the defaults are the ones marked
// [choice] in PATENTS.md, the alternatives run the literal or other reading.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::dispatch {

// One service (a model server with its own queue and worker threads). Times in ms.
struct ServiceConfig {
  std::string name;
  // Expected run time in ms, fractions allowed (a 0.25 ms model); the initial value of the
  // learned cost. The cost is kept exactly and rounded to whole ms only where it meets a
  // GPU's mark (fin_time, claims 1 and 4), whose unit is the ms.
  double cost_time = 100;
  DurationMs wait_time = 50;   // budget before grabbing directly (claims 2, 3)
  DurationMs try_time = 10;    // retry period (claim 2)
};

// Claim 5: who may clear a GPU's mark when a task finishes.
enum class ReleaseMode {
  kOwnerChecked,  // default: only the task that holds the lock resets the mark
  kLiteral,       // any finishing task sets fin_time = now and clears the lock
};

// Claim 4: how a grab updates fin_time.
enum class FinTimeUpdate {
  kLiteral,  // default: fin_time = now + cost_time (may lower it)
  kMax,      // fin_time = max(fin_time, now + cost_time)
};

// Claim 1: the order in which GPUs are examined while the wait budget lasts.
enum class ScanOrder {
  kIndex,           // default: GPU 0, 1, 2, ...
  kEarliestFinish,  // lowest fin_time first, ties by index
};

// Claim 2: how the remaining wait budget shrinks between rounds.
enum class WaitBudget {
  kSubtractTryTime,  // default: w -= try_time after every round
  kElapsed,          // w = wait_time - (now - first attempt)
};

// Claim 3: what happens when the budget is spent.
enum class DirectMode {
  kLockEarliestFinish,  // mode A, default: take the lock of the GPU with the lowest fin_time
  kNoLock,              // mode B: run on that GPU without touching its mark
};

// Claim 6: how cost_time is learned from observed run times.
enum class CostLearning {
  kCumulativeMean,  // default: mean of all observations (the configured value is dropped)
  kEma,             // cost = alpha * observed + (1 - alpha) * cost, starting at the config
  kOffline,         // never updated: cost_time comes from an offline test (see cost table)
};

struct DecisionEvent;  // realtime_dispatcher.h

struct DispatcherConfig {
  int gpu_count = 1;
  std::vector<ServiceConfig> services;
  ReleaseMode release = ReleaseMode::kOwnerChecked;
  FinTimeUpdate fin_update = FinTimeUpdate::kLiteral;
  ScanOrder scan = ScanOrder::kIndex;
  WaitBudget budget = WaitBudget::kSubtractTryTime;
  DirectMode direct = DirectMode::kLockEarliestFinish;
  CostLearning learning = CostLearning::kCumulativeMean;
  double ema_alpha = 0.2;
  // Backpressure (not in the patent; as Triton bounds an instance's concurrency and a
  // request's queue delay). At most `max_per_gpu` leases run on one GPU at once (0: no cap);
  // a GPU at its cap is skipped by claims 1 and 3 alike. Acquire gives up with Unavailable
  // once it has waited `acquire_timeout` ms without a grant (0: waits until granted).
  int max_per_gpu = 0;
  DurationMs acquire_timeout = 0;
  // Called under the dispatcher's lock for every round of every request (tests and tracing).
  // It must not call back into the dispatcher. Empty: no cost.
  std::function<void(const DecisionEvent&)> on_decision;
};

// Checks every field; the message names the field, the service and the value.
// CN113051059B claim 7: wait_time < cost_time. Also try_time > 0, unique non-empty names,
// max_per_gpu >= 0 and acquire_timeout >= 0.
Status ValidateConfig(const DispatcherConfig& config);

// The checks every dispatch policy's configuration shares: gpu_count in [1, max_gpus], at
// least one service, ema_alpha in (0, 1] for kEma, max_per_gpu >= 0, acquire_timeout >= 0.
Status ValidateCommonFields(int gpu_count, int max_gpus, size_t services, CostLearning learning,
                            double ema_alpha, int max_per_gpu);
Status ValidateAcquireTimeout(DurationMs acquire_timeout);

// An offline cost table (claim 6, "obtained by an offline test"): one `service cost_ms` or
// `service=cost_ms` per line; blank lines and `#` comments are ignored.
StatusOr<std::map<std::string, DurationMs>> ParseCostTable(std::string_view text);
// Sets each named service's cost_time from `table`; NotFound for a name not in `config`.
Status ApplyCostTable(const std::map<std::string, DurationMs>& table, DispatcherConfig& config);

const char* ScanOrderName(ScanOrder s);

}  // namespace gpusched::dispatch
