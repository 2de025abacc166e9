#pragma once
// GpuschedPolicy: gpusched's own node-level dispatch policy, beyond CN113051059B's claims (the
// literal dispatcher stays in realtime_dispatcher.h). It never makes a request wait while a GPU
// may take it: it grants the GPU where the request is expected to finish earliest, weighed
// against the delay it causes the leases already there.
//
// Model: a GPU shares its time equally among the leases running on it (processor sharing, as CUDA
// streams of one process or MPS clients roughly do; SimDevice does it exactly). For each GPU the
// policy tracks its co-runners: for each running lease the work it has received so far
// (elapsed time / co-runners, integrated at every grant and release) and from it the work r it
// still needs (below). A request of cost c on a GPU whose leases still need r_1..r_k finishes after c +
// sum_i m_i, m_i = min(r_i, c), and delays co-runner i by m_i. The policy grants the GPU with the
// least added slowdown, sum_i (m_i / c + w * m_i / cost_i): its own wait relative to its cost
// plus each co-runner's delay relative to theirs, weighted by w = co_runner_weight. Idle GPUs
// come first; ties go to the lowest index.
//
// What a running lease still needs: run times vary around their expected value, so a lease
// that has received work a is expected to need E[X - a | X > a] more, X lognormal with mean
// expected_ms and log-scale spread s (its mean residual life). A lease past its expected run
// time is thus taken to need more the wider the spread, and a lease whose estimate is tight
// little more than expected - a. The policy learns s per service from the leases it releases
// (the standard deviation of log(received work / expected_ms)); before kSpreadWarmup of them
// it assumes prior_spread. So a request that brings a good estimate of its own run time
// teaches the policy to trust such estimates, and one that brings none leaves the service's.
//
// Each GPU keeps a mark like the patent's: fin_time is the latest expected finish of its
// running leases (now + the work they still need in all), owner the lease expected to finish
// last (0 when idle). cost_time is learned (CostModel) from the work a lease received, not
// from its wall time, so sharing a GPU does not inflate the estimate.
//
// A request may bring its own expected run time (AcquireOptions::expected_ms, as a model server
// knows it from the input's size); it is then used for this request and recorded in its slot,
// so its co-runners' expected finishes use it too. Otherwise the service's learned cost is.
//
// Blocking happens only under backpressure: when every GPU is out of service or at
// max_per_gpu, Acquire waits on the injected Clock and wakes as soon as a lease is released or
// a GPU comes back (not every try_time), until acquire_timeout, its deadline or its cancel.
//
// Where the marks live: a MarkStore (mark_store.h). By default this process's memory; with a
// SharedMarkStore (shared_marks.h) a shared-memory segment that every process opening the same
// name uses, so marks, co-runners, GPUs out of service and tickets are one set for the whole
// machine. Costs, metrics and the leases to be released stay per process, except the released
// and failed requests and the latency and queue-wait histograms of each service, which go to
// the segment's SharedMetricsTable too (issue 42), so Metrics() reports every process's in
// all_completed, all_failed and the histograms (completed, failed and the rest: this one's).
//
// Thread-safety: safe for any number of threads; all state lives under the store's lock.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "dispatch/cost_model.h"
#include "dispatch/dispatch_metrics.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/mark_store.h"
#include "dispatch/node_dispatcher.h"
#include "dispatch/placement_inputs.h"
#include "dispatch/realtime_config.h"
#include "dispatch/realtime_dispatcher.h"

namespace gpusched::dispatch {

struct GpuschedConfig {
  int gpu_count = 1;
  // Services: name and cost_time are used (wait_time and try_time are the patent's and are
  // ignored here).
  std::vector<ServiceConfig> services;
  CostLearning learning = CostLearning::kCumulativeMean;
  double ema_alpha = 0.2;
  int max_per_gpu = 0;            // leases at once on one GPU; 0: kMaxCoRunners
  DurationMs acquire_timeout = 0;  // Acquire gives up (Unavailable) after this; 0: never
  // A running lease is expected to need at least this fraction of its cost more; in [0, 1].
  double min_remaining_fraction = 0;
  // The log-scale spread of run times around their expected value assumed until a service's
  // own is learned; >= 0. 0.6 is a wide spread (a lognormal whose p99 is ~3x its median); 0
  // trusts expected run times exactly.
  double prior_spread = 0.6;
  // false: prior_spread is kept, never learned (with prior_spread 0 and min_remaining_fraction
  // 0.5 this is the remaining-work rule of the first version of this policy).
  bool learn_spread = true;
  // Weight of the co-runners' added slowdown against the request's own; >= 0. 1 is the plain
  // sum of slowdowns. 2 gave a lower p50 than 1 at 80 % load, at the same p99, in a simulation
  // of processor-shared GPUs with the bench's workload; on `gpusched bench dispatch` the
  // difference is within run-to-run noise.
  double co_runner_weight = 2;
  // Issue 42, item 5 (placement_inputs.h). Each GPU's memory in MiB (gpu_count entries, > 0);
  // empty: memory is not tracked and requests must ask for none. Not with shared marks (the
  // memory of other processes' leases is not in the segment).
  std::vector<int64_t> gpu_memory_mib;
  // A request of a model goes to a GPU that has the model loaded while that GPU's expected
  // finish for it is within this many ms of the earliest finish any GPU offers; >= 0.
  double affinity_margin_ms = 0;
  // Models remembered per GPU (least recently granted forgotten first); >= 0.
  int models_per_gpu = 4;
  // Seed speed factors (time multipliers; 2 = twice as slow), gpu_count entries, > 0; empty:
  // all 1. Learned from run times when learn_speed.
  std::vector<double> gpu_speed;
  bool learn_speed = true;
};

// Names the field and the value: gpu_count in [1, kMaxMarkGpus], at least one service, unique non-empty
// names, finite cost_time > 0, ema_alpha in (0, 1] for kEma, max_per_gpu and acquire_timeout
// >= 0 (max_per_gpu <= kMaxCoRunners), min_remaining_fraction in [0, 1], prior_spread finite
// and >= 0, co_runner_weight finite and >= 0; gpu_memory_mib and gpu_speed empty or
// gpu_count entries > 0, affinity_margin_ms finite >= 0, models_per_gpu >= 0.
Status ValidateGpuschedConfig(const GpuschedConfig& config);

// What the policy knows of one GPU (for tests, tracing and metrics).
struct GpuLoad {
  int co_runners = 0;                   // leases running on it
  std::vector<TimeMs> expected_finish;  // each running lease's, in grant order, under sharing
  SignalMark mark;                      // latest expected finish and the lease it belongs to
  int64_t free_mib = -1;                // memory not taken by leases; -1: not tracked
  std::vector<std::string> models;      // loaded, most recently granted first
  double speed = 1;                     // time multiplier (1: the fastest GPU)
};

class GpuschedPolicy final : public NodeDispatcher {
 public:
  // `clock` must outlive the policy. `store` null: the marks live in this process
  // (LocalMarkStore). A store's gpu count must be config.gpu_count.
  static StatusOr<std::unique_ptr<GpuschedPolicy>> Create(GpuschedConfig config, Clock& clock,
                                                          std::unique_ptr<MarkStore> store = nullptr);

  std::string_view name() const override { return "gpusched"; }
  int gpu_count() const override { return config_.gpu_count; }
  StatusOr<int> ServiceIndex(std::string_view name) const override;
  // Grants at once unless every GPU is out of service, at max_per_gpu or without the
  // request's expected_mem_mib free, or a waiting request of higher (or equal and earlier)
  // priority is ahead of it; then waits for a release. A waiting request holds back those
  // behind it even when it fits nowhere yet, so none starves (head-of-line blocking, by
  // design). InvalidArgument for expected_mem_mib larger than every GPU, or given without
  // gpu_memory_mib. Unavailable after acquire_timeout, the options' deadline or cancel;
  // FailedPrecondition after Shutdown(true); InvalidArgument for a bad service or a negative or
  // non-finite expected_ms.
  using NodeDispatcher::Acquire;
  StatusOr<Lease> Acquire(int service, const AcquireOptions& options) override;
  // Acquire's argument checks: the service, expected_ms and expected_mem_mib (larger than every
  // GPU, or given without gpu_memory_mib).
  Status CheckRequest(int service, const AcquireOptions& options) const override;
  // Ends the lease; a succeeded one trains cost_time with the work it received. NotFound for
  // a ticket not outstanding here, InvalidArgument when gpu/service differ from the grant's.
  Status Release(const Lease& lease, Outcome outcome) override;

  // Takes `gpu` out of service or puts it back (for every process sharing the marks).
  // InvalidArgument for a bad index.
  Status SetGpuEnabled(int gpu, bool enabled) override;
  // After Shutdown(true) nothing is granted and waiting requests fail at once.
  void Shutdown(bool stop) override;

  GpuLoad load(int gpu) const;
  SignalMark mark(int gpu) const override { return load(gpu).mark; }
  // Grants, releases and queueing of this process's requests; GPU figures count its leases.
  DispatchMetrics Metrics() const override;
  double cost_time_ms(int service) const;
  int outstanding() const;

 private:
  GpuschedPolicy(GpuschedConfig config, Clock& clock, std::unique_ptr<MarkStore> store);
  // REQUIRES: the store locked. Brings every lease's received work on `g` up to `now_ns`.
  static void AdvanceLocked(GpuSlots& g, int64_t now_ns);
  // What placement needs of one request; cost_ms is on the fastest GPU.
  struct Ask {
    double cost_ms = 0;
    int64_t mem_mib = 0;
    const std::string* model = nullptr;
  };
  // REQUIRES: locked and every GPU advanced to now. The eligible GPU where `ask` fits and adds
  // the least slowdown, or a GPU that has its model loaded whose expected finish is within
  // affinity_margin_ms of the earliest; -1 when none may take it.
  int PickLocked(const Ask& ask) const;
  // REQUIRES: locked. Slowdown `ask` adds on `gpu` and its expected finish there (ms from now).
  std::pair<double, double> ScoreLocked(int gpu, const Ask& ask) const;
  // InvalidArgument for a request this policy can never grant.
  // Work `r` still needs, `extra_ms` after its GPU's last advance.
  double Remaining(const RunningSlot& r, double extra_ms) const;
  bool EligibleLocked(int gpu) const;
  GpuLoad LoadLocked(int gpu, int64_t now_ns) const;
  // REQUIRES: locked. Why a waiting Acquire must stop now, or Ok to keep waiting.
  Status WaitEndedLocked(int service, const AcquireOptions& options, int64_t requested_ns,
                         int64_t now_ns) const;
  // REQUIRES: locked. The ms to sleep before the next look.
  DurationMs WaitSliceLocked(const AcquireOptions& options, int64_t requested_ns,
                             int64_t now_ns) const;
  Lease GrantLocked(int service, int gpu, const Ask& ask, int attempt, int64_t requested_ns,
                    int64_t now_ns);
  // REQUIRES: locked. Takes `ticket`'s slot off `g`, training costs, spread and speed.
  void DropSlotLocked(const Lease& granted, Outcome outcome);

  // REQUIRES: locked. The log-scale spread of `service`'s run times around their estimates.
  double SpreadLocked(int service) const;

  // Running log(received / expected) statistics of one service's released leases (Welford).
  struct SpreadStats {
    uint64_t n = 0;
    double mean = 0, m2 = 0;
  };

  const GpuschedConfig config_;
  Clock& clock_;
  const std::unique_ptr<MarkStore> store_;
  const uint64_t ticket_base_;
  const int max_per_gpu_;  // config's, or kMaxCoRunners for "no cap"

  // Under the store's lock.
  mutable MarkTable* table_;
  bool shut_down_ = false;
  std::map<uint64_t, Lease> leases_;  // this process's outstanding leases, by ticket
  CostModel costs_;
  std::vector<SpreadStats> spreads_;  // by service
  MetricsRecorder metrics_;
  // Issue 42, item 5 (placement_inputs.h).
  GpuMemoryLedger memory_;
  ModelAffinity affinity_;
  SpeedFactors speeds_;
  WaitQueue waiting_;
  std::map<uint64_t, int64_t> lease_mem_mib_;  // by ticket, leases that took memory
};

}  // namespace gpusched::dispatch
