#include "dispatch/c_api/call_gate.h"

namespace gpusched::capi {

CallGate::Pass::Pass(CallGate& gate, const char* call, bool allowed_while_closing)
    : gate_(gate) {
  std::lock_guard lock(gate_.mu_);
  if (gate_.closing_ && !allowed_while_closing) {
    status_ = FailedPrecondition(std::string(call) + ": the handle is being destroyed");
    return;
  }
  gate_.in_flight_++;
}

CallGate::Pass::~Pass() {
  if (!status_.ok()) return;
  std::lock_guard lock(gate_.mu_);
  if (--gate_.in_flight_ == 0) gate_.idle_cv_.notify_all();
}

Status CallGate::BeginClose(const char* what) {
  std::lock_guard lock(mu_);
  if (closing_) return FailedPrecondition(std::string(what) + ": already in progress on another thread");
  closing_ = true;
  return Status::Ok();
}

void CallGate::WaitIdle() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
}

void CallGate::Reopen() {
  std::lock_guard lock(mu_);
  closing_ = false;
}

}  // namespace gpusched::capi
