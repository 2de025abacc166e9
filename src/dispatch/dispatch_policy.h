#pragma once
// DispatchPolicy: picks a GPU of one server for each request of a service. The CN113051059B
// RealtimeDispatcher implements it, and so do the baselines the benchmark compares it with
// (baseline_policies.h), so one load generator drives them all.
//
// Thread-safety: implementations are safe for many threads calling Acquire/Complete at once.

#include <cstdint>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::dispatch {

// A granted request: run it on `gpu`, then hand the lease back to Complete.
struct Lease {
  int gpu = -1;
  int service = -1;
  uint64_t ticket = 0;       // unique per request; the owner recorded in a GPU's lock
  bool locked = false;       // true when this request took the GPU's lock (claims 1, 3 mode A)
  int attempts = 0;          // rounds until granted (1 = at once)
  int64_t requested_ns = 0;  // clock time the request arrived
  int64_t granted_ns = 0;    // clock time the GPU was granted
};

class DispatchPolicy {
 public:
  virtual ~DispatchPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual int gpu_count() const = 0;
  // Index of the service called `name`; NotFound otherwise.
  virtual StatusOr<int> ServiceIndex(std::string_view name) const = 0;
  // Blocks (on the injected clock) until a GPU is granted. InvalidArgument for a bad service.
  virtual StatusOr<Lease> Acquire(int service) = 0;
  // The work of `lease` is done; its run time is now - granted.
  virtual void Complete(const Lease& lease) = 0;
};

}  // namespace gpusched::dispatch
