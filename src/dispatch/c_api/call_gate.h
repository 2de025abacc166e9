#pragma once
// CallGate: what lets a C handle be destroyed while other threads are using it. Every entry
// point of a handle passes through the gate (CallGate::Pass); BeginClose() refuses new calls,
// WaitIdle() waits for the calls in flight to leave, and only then may the handle be freed.
// A call that starts after the handle was freed never reaches the gate: the registry of live
// handles (handle_registry.h) refuses it first.
//
// Thread-safety: all methods are thread-safe.

#include <condition_variable>
#include <mutex>
#include <string>

#include "base/status.h"

namespace gpusched::capi {

class CallGate {
 public:
  // RAII pass: while it lives, WaitIdle() waits. `status()` is not ok when the gate refused.
  class Pass {
   public:
    Pass(CallGate& gate, const char* call, bool allowed_while_closing = false);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    const Status& status() const { return status_; }

   private:
    CallGate& gate_;
    Status status_;
  };

  // Refuses new calls (except those allowed while closing) from now on; FailedPrecondition when
  // another thread is already closing this gate. Does not wait, so it can run under another
  // lock (the handle registry's: handle_registry.h's CloseHandle).
  Status BeginClose(const char* what);
  // Waits for the calls in flight to leave. REQUIRES: BeginClose() succeeded.
  void WaitIdle();
  // Undoes BeginClose() (the destroy was refused after all): calls are accepted again.
  void Reopen();

 private:
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int in_flight_ = 0;
  bool closing_ = false;
};

}  // namespace gpusched::capi
