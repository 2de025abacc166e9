#pragma once
// The registry of live C handles: every handle of gpusched_c.h (dispatcher, cancel, simulated
// devices, chunk runtime) is recorded with its kind when created and removed when destroyed,
// so a destroyed, made-up or wrong-kind pointer is refused by address, without being
// dereferenced. Entering a handle and beginning its destroy both happen under the registry's
// lock, so a destroy cannot free a handle between the check and the CallGate::Pass; a second
// destroy, or a call, that comes after the handle was removed is refused here.
//
// Limit: the registry knows addresses only. A handle destroyed and followed by a new handle of
// the same kind at the same address is the new handle to the registry.
//
// Thread-safety: all functions are thread-safe.

#include <functional>
#include <optional>

#include "base/status.h"
#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/call_gate.h"

namespace gpusched::capi {

enum class HandleKind { kDispatcher, kCancel, kSimDevices, kChunksRuntime };

// Records `h` as a live handle of `kind`.
void AddHandle(const void* h, HandleKind kind);
// Forgets `h`: later calls with it are refused. Call after its gate was closed, before freeing.
void RemoveHandle(const void* h);

// Under the registry's lock: `what` names the argument in errors ("runtime"). InvalidArgument "<what>: not a live handle ..." when `h` is not a live handle of
// `kind`; else runs `body()` and returns what it returns. `h` is dereferenced in `body` only.
Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status()>& body);

// Checks that `h` is a live handle of `kind` and passes its gate into `pass`: while `pass`
// lives, a destroy of `h` waits.
template <typename H>
Status Enter(H* h, HandleKind kind, const char* what, const char* call,
             std::optional<CallGate::Pass>& pass, bool allowed_while_closing = false) {
  if (h == nullptr) return Null(what);
  return WithLiveHandle(h, kind, what, [&] {
    pass.emplace(h->gate, call, allowed_while_closing);
    return pass->status();
  });
}

// The first half of a destroy: checks that `h` is live, begins closing its gate (refusing new
// calls, and a second destroy, from now on) under the registry's lock, then waits for the
// calls in flight. The caller then either removes and frees `h`, or reopens its gate.
template <typename H>
Status CloseHandle(H* h, HandleKind kind, const char* what, const char* call) {
  if (h == nullptr) return Null(what);
  GS_RETURN_IF_ERROR(WithLiveHandle(h, kind, what, [&] { return h->gate.BeginClose(call); }));
  h->gate.WaitIdle();
  return Status::Ok();
}

}  // namespace gpusched::capi
