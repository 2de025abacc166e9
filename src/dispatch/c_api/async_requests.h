#pragma once
// AsyncRequests: the asynchronous acquires of one C dispatcher handle (issue 42): requests
// that wait in a queue instead of on a thread, so an event loop with thousands of queued
// requests needs no thread per request.
//
// How a request completes: it is tried at once when submitted (if nothing is queued before
// it), then again, in queue order, each time capacity may have freed (Pump: a release, a GPU
// put back in service, a poll). Queue order is the gpusched policy's order of waiting requests
// (issue 42, item 5): highest priority first, then arrival. The head of the queue is tried
// first and the pump stops at the first request that cannot be granted yet, so no request is
// granted before a queued one of higher priority or of equal priority and older (head-of-line,
// as the policy's own waiters: a request that fits nowhere yet, for its memory, holds back the
// lower ones behind it, and none starves). With every priority 0 that is plain FIFO. Blocking
// acquires of the same dispatcher are not in this queue; they and the pump take freed capacity
// in whatever order they reach the policy (which orders its own waiters by the same rule).
//
// How the caller learns of completions: one file descriptor per dispatcher, readable (poll,
// epoll, asyncio's add_reader) while completions wait to be taken with Take(). It is a timerfd
// on CLOCK_MONOTONIC, not an eventfd: it is armed to fire at once when a completion is queued,
// and otherwise at the earliest deadline of a queued request (or at the next re-check), so
// timeouts end on time with no timer thread at all; the caller's next Take() expires them.
// The deadlines are read from the injected Clock and armed on CLOCK_MONOTONIC: they agree for
// RealClock (steady_clock); with another clock the fd only wakes the caller early or late by
// the difference, and Take() decides by the Clock.
//
// Thread-safety: all methods are thread-safe; TryGrant callbacks run under this object's lock
// (lock order: this lock, then the dispatcher's).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "dispatch/dispatch_policy.h"

namespace gpusched::capi {

// One queued request. Times are ns of the dispatcher's Clock.
struct AsyncRequest {
  uint64_t id = 0;
  int service = 0;
  double expected_ms = 0;
  int64_t requested_ns = 0;
  int64_t deadline_ns = 0;      // 0: none
  bool deadline_is_timeout = false;  // the dispatcher's acquire_timeout, not the caller's deadline
  // Placement inputs (gpusched_dispatcher_acquire2_async), passed to the policy at each try.
  int64_t expected_mem_mib = 0;
  std::string model;  // "": none
  int32_t priority = 0;  // orders the queue: higher first
};

// A completed request: code 0 and a lease, or a GPUSCHED_E_* code and why.
struct AsyncCompletion {
  uint64_t id = 0;
  int code = 0;
  dispatch::Lease lease;
  std::string message;
};

// One try of the oldest request: code 0 (granted), kBusy (nothing free now; keep it queued), or
// any other GPUSCHED_E_* code (it fails with that code and message).
struct AsyncTry {
  static constexpr int kBusy = -1;
  int code = kBusy;
  dispatch::Lease lease;
  std::string message;
};

class AsyncRequests {
 public:
  using TryGrant = std::function<AsyncTry(const AsyncRequest&)>;

  // `recheck_ms` > 0: while requests are queued the fd fires at least this often, so a poll
  // retries them even when the capacity was freed where no Pump sees it (another process
  // sharing the marks). Unavailable when the OS refuses the timerfd.
  static StatusOr<std::unique_ptr<AsyncRequests>> Create(Clock& clock, int64_t recheck_ms);
  ~AsyncRequests();
  AsyncRequests(const AsyncRequests&) = delete;
  AsyncRequests& operator=(const AsyncRequests&) = delete;

  int fd() const { return fd_; }
  // Queues `r` (its id is assigned here and returned), then pumps.
  uint64_t Submit(AsyncRequest r, const TryGrant& try_grant);
  // Fails the requests whose deadline passed, then grants the queued ones in queue order
  // (priority, then arrival) while try_grant grants; stops at the first kBusy.
  void Pump(const TryGrant& try_grant);
  // Ends queued request `id` with GPUSCHED_E_CANCELLED. NotFound when it is not queued
  // (completed already, or never submitted).
  Status Cancel(uint64_t id);
  // Pumps, then takes up to `cap` completions, oldest first.
  std::vector<AsyncCompletion> Take(size_t cap, const TryGrant& try_grant);
  // Makes the fd readable once (a waiter returns; Take may then return nothing).
  void Wake();
  size_t queued() const;
  // Requests of `service` ended by their deadline or acquire_timeout so far.
  uint64_t expired(int service) const;

 private:
  AsyncRequests(Clock& clock, int fd, int64_t recheck_ms);
  // REQUIRES: mu_ held.
  void ExpireLocked(int64_t now_ns);
  void CompleteLocked(uint64_t id, int code, dispatch::Lease lease, std::string message);
  void EraseLocked(std::map<uint64_t, AsyncRequest>::iterator it);
  void PumpLocked(const TryGrant& try_grant);
  // Fires the fd now (completions wait), at the next deadline or re-check, or never.
  void ArmLocked(int64_t now_ns);

  Clock& clock_;
  const int fd_;
  const int64_t recheck_ms_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, AsyncRequest> queued_;            // by id: oldest first
  std::set<std::pair<int64_t, uint64_t>> order_;       // (-priority, id) of queued ones: the
                                                       // order they are tried in
  std::set<std::pair<int64_t, uint64_t>> deadlines_;   // (deadline_ns, id) of queued ones
  std::map<int, uint64_t> expired_;                    // by service
  int64_t armed_ns_ = 0;  // what the fd is armed to (0: disarmed, -1: unknown after a read), so
                          // a release with nothing queued costs no timerfd_settime
  std::deque<AsyncCompletion> done_;                   // completed, not yet taken
};

}  // namespace gpusched::capi
