#pragma once
// NodeDispatcher: what the C ABI and the bindings drive, whichever policy is behind it: the
// gpusched policy (gpusched_policy.h, the default) or the literal CN113051059B dispatcher
// (realtime_dispatcher.h). Adds to DispatchPolicy the per-request options of an acquire
// (deadline, cancellation, expected run time), release with an outcome, GPUs out of service,
// shutdown, marks and metrics.
//
// Thread-safety: implementations are safe for any number of threads.

#include <cstdint>
#include <string>

#include "base/status.h"
#include "dispatch/cancel_token.h"
#include "dispatch/dispatch_metrics.h"
#include "dispatch/dispatch_policy.h"

namespace gpusched::dispatch {

// One GPU's signal mark. owner == 0: no lock.
struct SignalMark {
  uint64_t owner = 0;
  TimeMs fin_time = 0;
};

// How the work of a lease ended. A failed request's run time does not train cost_time.
enum class Outcome { kSucceeded, kFailed };

// Per-request options of an acquire.
struct AcquireOptions {
  // Clock time (ns, the dispatcher's clock) after which the acquire gives up with
  // Unavailable; 0: none beyond the dispatcher's acquire_timeout (the earlier of both wins).
  int64_t deadline_ns = 0;
  // When fired, a waiting acquire gives up with Unavailable at once. May be null. Must
  // outlive the call.
  CancelToken* cancel = nullptr;
  // This request's expected run time on an idle GPU, in ms (a model server often knows it from
  // the input size); 0: its service's learned cost. Used by the gpusched policy only.
  double expected_ms = 0;
  // When the request arrived (ns, the dispatcher's clock), if before this call: a queued
  // asynchronous request's submit time, so its lease's requested_ns and queue wait count the
  // time it queued. 0: now.
  int64_t requested_ns = 0;
  // Issue 42, item 5; the gpusched policy only (the C ABI refuses them for the literal one).
  // GPU memory the request needs while it runs, MiB; 0: none. Granted only where it fits.
  int64_t expected_mem_mib = 0;
  // The model it serves; "": none. Kept on the GPUs that have it loaded (affinity_margin_ms).
  std::string model = {};
  // Higher is granted first among waiting requests; equal priorities in arrival order.
  int32_t priority = 0;
};

// A release of `lease` against the lease `granted` under its ticket: InvalidArgument naming
// both when the GPU or the service differ.
inline Status CheckReleaseMatchesGrant(const Lease& granted, const Lease& lease) {
  if (granted.gpu == lease.gpu && granted.service == lease.service) return Status::Ok();
  return InvalidArgument("lease: gpu " + std::to_string(lease.gpu) + " / service " +
                         std::to_string(lease.service) + " do not match ticket " +
                         std::to_string(lease.ticket) + " (granted gpu " +
                         std::to_string(granted.gpu) + ", service " +
                         std::to_string(granted.service) + ")");
}

class NodeDispatcher : public DispatchPolicy {
 public:
  using DispatchPolicy::Acquire;
  StatusOr<Lease> Acquire(int service) override { return Acquire(service, AcquireOptions{}); }
  // Blocks until a GPU is granted. Unavailable when the deadline, the acquire_timeout or the
  // cancel token ended the wait; FailedPrecondition after Shutdown(true).
  virtual StatusOr<Lease> Acquire(int service, const AcquireOptions& options) = 0;
  // The argument checks Acquire makes of `options` (InvalidArgument naming the field), without
  // acquiring: a caller that queues requests itself (the C ABI's asynchronous acquire) refuses
  // a bad one when it is given, as Acquire would. Default: none.
  virtual Status CheckRequest(int service, const AcquireOptions& options) const {
    (void)service;
    (void)options;
    return Status::Ok();
  }
  // NotFound for a ticket not outstanding here; InvalidArgument when gpu/service differ.
  virtual Status Release(const Lease& lease, Outcome outcome) = 0;
  void Complete(const Lease& lease) override { (void)Release(lease, Outcome::kSucceeded); }
  virtual Status SetGpuEnabled(int gpu, bool enabled) = 0;
  // After Shutdown(true) nothing is granted and waiting requests fail; false undoes it.
  virtual void Shutdown(bool stop) = 0;
  // REQUIRES: 0 <= gpu < gpu_count().
  virtual SignalMark mark(int gpu) const = 0;
  virtual DispatchMetrics Metrics() const = 0;
};

}  // namespace gpusched::dispatch
