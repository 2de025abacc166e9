#pragma once
// RealtimeDispatcher: the multi-GPU real-time task lock of CN113051059B (PATENTS.md section 1).
//
// Each GPU has one signal mark {lock owner, fin_time}. A request of service s scans the GPUs and
// grabs one that is idle or whose remaining busy time is at least s.cost_time (claim 1); if none
// qualifies it sleeps try_time and tries again while its wait budget lasts (claim 2); once the
// budget is spent it grabs directly (claim 3). A grab sets lock = request, fin_time = now + cost
// (claim 4). When the work finishes, the mark is reset (claim 5) and cost_time learns the
// observed run time (claim 6). Configs with wait_time >= cost_time are rejected (claim 7).
//
// Thread-safety: safe for any number of threads. All marks live under one mutex, so every
// check-and-set is atomic (claim 8 scenario: no torn fin_time/owner). Waiting happens outside
// the lock, on the injected Clock, so FakeClock drives every test.
//
// What the per-GPU lock is, and is not: it is an ownership token recorded in the GPU's mark
// (PATENTS.md section 1, "Why grab when d >= cost_time?"). It is NOT mutual exclusion: a
// request whose cost fits inside the owner's remaining busy window is granted the same GPU and
// runs beside it (claim 1), and in direct mode B (claim 3) a request runs without the lock at
// all. So several leases may run on one GPU at once; set DispatcherConfig::max_per_gpu to cap
// that number. The lock guarantees only that marks are updated atomically and, with the
// owner-checked release, that only the owner's release resets its GPU's mark.
//
// Shared marks (CN113051059B claim 1's globally unique marks): given a MarkStore (Create's
// `marks`, a SharedMarkStore opened for MarkPolicy::kLiteral), every GPU's signal mark and its
// running leases live in the store's table, so dispatchers in several processes on one
// machine scan, grab and reset one set of marks. Tickets then come from the table (unique
// across the processes); a lease of a process that died is reclaimed (and the mark's owner
// cleared) when a round finds no GPU. Service costs, metrics and the GPUs taken out of
// service stay per process. Lock order: mu_, then the store.
//
// Leases: every grant gets a ticket unique in the process (dispatcher id in the high bits) and
// is recorded as outstanding until Release; a ticket that is not outstanding here (released
// twice, zeroed, made up, or another dispatcher's) is refused, so counters never go negative.

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/work_pool.h"
#include "dispatch/cost_model.h"
#include "dispatch/decision.h"
#include "dispatch/dispatch_metrics.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/mark_store.h"
#include "dispatch/node_dispatcher.h"
#include "dispatch/realtime_config.h"

namespace gpusched::dispatch {

// One round of one request, reported to DispatcherConfig::on_decision.
struct DecisionEvent {
  int service = 0;
  uint64_t ticket = 0;
  TimeMs now = 0;
  DurationMs wait_left = 0;
  Decision decision = Decision::kGiveUp;
  int gpu = -1;  // the GPU granted; -1 on give-up
};

// fn(gpu)'s result wrapped: Status for void functions, StatusOr<R> otherwise.
template <typename R>
using RunResult = std::conditional_t<std::is_void_v<R>, Status, StatusOr<R>>;

class RealtimeDispatcher final : public NodeDispatcher {
 public:
  // Validates `config` (ValidateConfig). `clock` must outlive the dispatcher; `pool`, when
  // given, runs the requests of Submit and must outlive it too. `marks`, when given, holds the
  // signal marks (shared marks; its gpu count must be config.gpu_count).
  static StatusOr<std::unique_ptr<RealtimeDispatcher>> Create(
      DispatcherConfig config, Clock& clock, WorkPool* pool = nullptr,
      std::unique_ptr<MarkStore> marks = nullptr);

  std::string_view name() const override { return "patent"; }
  int gpu_count() const override { return config_.gpu_count; }
  StatusOr<int> ServiceIndex(std::string_view name) const override;

  // One round of claims 1, 3 and 4 with remaining wait budget `wait_left`: a lease, or nothing
  // (GIVE_UP on every GPU). Never blocks on the clock.
  std::optional<Lease> TryAcquire(int service, DurationMs wait_left);
  // The full request of claim 2: rounds every try_time until granted. Unavailable when
  // config().acquire_timeout or options.deadline_ns passed first or options.cancel fired (the
  // wait between rounds ends at once on cancel or shutdown); FailedPrecondition once
  // Shutdown() was called. options.expected_ms is ignored: claim 1 uses the learned cost.
  using NodeDispatcher::Acquire;
  StatusOr<Lease> Acquire(int service, const AcquireOptions& options) override;
  // Claims 5 and 6: resets the mark (owner-checked or literal) and, for a succeeded request,
  // learns the run time. Uses the GPU, service and grant time recorded for the ticket, not the
  // caller's copy. NotFound for a ticket not outstanding here; InvalidArgument when the
  // lease's gpu or service differ from the ticket's.
  Status Release(const Lease& lease, Outcome outcome) override;

  // Takes `gpu` out of service (no new grants; its running leases finish normally) or puts
  // it back. InvalidArgument for a bad index.
  Status SetGpuEnabled(int gpu, bool enabled) override;
  bool gpu_enabled(int gpu) const;
  // After Shutdown(true) no lease is granted: requests in Acquire fail at their next round.
  // Release still works. Shutdown(false) accepts requests again.
  void Shutdown(bool stop) override;
  // Leases granted and not yet released.
  int outstanding() const;

  // Acquires a GPU for `service`, calls fn(gpu) on this thread, completes, and returns fn's
  // result. NotFound for an unknown service.
  template <typename Fn>
  auto Run(std::string_view service, Fn&& fn) -> RunResult<std::invoke_result_t<Fn&, int>>;
  // Like Run, on a thread of the pool given to Create. Without a pool the future holds
  // FailedPrecondition.
  template <typename Fn>
  auto Submit(std::string_view service, Fn fn)
      -> std::future<RunResult<std::invoke_result_t<Fn&, int>>>;

  SignalMark mark(int gpu) const override;
  DurationMs cost_time(int service) const;
  DispatchMetrics Metrics() const override;
  const DispatcherConfig& config() const { return config_; }

 private:
  RealtimeDispatcher(DispatcherConfig config, Clock& clock, WorkPool* pool,
                     std::unique_ptr<MarkStore> marks);
  // REQUIRES: mu_ and the store (when shared) held. GPU g's signal mark and running leases,
  // from the shared table or this process's vectors.
  SignalMark MarkLocked(int gpu) const;
  void SetMarkLocked(int gpu, SignalMark mark);
  int RunningLocked(int gpu) const;
  // REQUIRES: as MarkLocked. Records (or drops) a lease among GPU g's running leases.
  void AddRunningLocked(int gpu, uint64_t ticket, double expected_ms);
  void DropRunningLocked(int gpu, uint64_t ticket);
  // REQUIRES: as MarkLocked. The next lease's ticket.
  uint64_t NextTicketLocked();
  // REQUIRES: mu_ held. The GPU chosen by claim 1 (or claim 3 when wait_left <= 0), or -1.
  int PickLocked(int service, DurationMs wait_left, TimeMs now, Decision& decision) const;
  // REQUIRES: mu_ held. May a new lease start on `gpu` (in service, under max_per_gpu)?
  bool EligibleLocked(int gpu) const;
  // Acquire's error once acquire_timeout passed: which limit kept the GPUs from it.
  Status TimeoutError(int service) const;
  std::vector<double> CostsLocked() const;

  const DispatcherConfig config_;
  Clock& clock_;
  WorkPool* const pool_;
  const uint64_t ticket_base_;  // this dispatcher's id in the high bits of its tickets
  std::atomic<uint64_t> next_ticket_{1};
  std::atomic<bool> shut_down_{false};

  mutable std::mutex mu_;
  std::condition_variable wake_;     // shutdown or a cancel: ends the wait between rounds
  const std::unique_ptr<MarkStore> shared_;  // null: the marks below, in this process
  std::vector<SignalMark> marks_;
  std::vector<int> running_;         // outstanding leases per GPU
  std::vector<bool> enabled_;        // in service
  std::map<uint64_t, Lease> leases_; // outstanding, by ticket
  CostModel costs_;
  MetricsRecorder metrics_;
};

template <typename Fn>
auto RealtimeDispatcher::Run(std::string_view service, Fn&& fn)
    -> RunResult<std::invoke_result_t<Fn&, int>> {
  using R = std::invoke_result_t<Fn&, int>;
  StatusOr<int> index = ServiceIndex(service);
  if (!index.ok()) return index.status();
  StatusOr<Lease> lease = Acquire(*index);
  if (!lease.ok()) return lease.status();
  // Release even if fn throws (as failed), so a GPU's mark never stays locked by a dead request.
  struct Completer {
    RealtimeDispatcher* d;
    const Lease& l;
    Outcome outcome = Outcome::kFailed;
    ~Completer() { (void)d->Release(l, outcome); }
  } completer{this, *lease};
  if constexpr (std::is_void_v<R>) {
    fn(lease->gpu);
    completer.outcome = Outcome::kSucceeded;
    return Status::Ok();
  } else {
    StatusOr<R> result(fn(lease->gpu));
    completer.outcome = Outcome::kSucceeded;
    return result;
  }
}

template <typename Fn>
auto RealtimeDispatcher::Submit(std::string_view service, Fn fn)
    -> std::future<RunResult<std::invoke_result_t<Fn&, int>>> {
  using Result = RunResult<std::invoke_result_t<Fn&, int>>;
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  if (pool_ == nullptr) {
    promise->set_value(FailedPrecondition("Submit: no WorkPool was given to Create"));
    return future;
  }
  pool_->Post([this, promise, name = std::string(service), fn = std::move(fn)]() mutable {
    promise->set_value(Run(name, fn));
  });
  return future;
}

}  // namespace gpusched::dispatch
