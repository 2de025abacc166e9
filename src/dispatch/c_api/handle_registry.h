#pragma once
// The registry of live C handles: every handle of gpusched_c.h (dispatcher, cancel, simulated
// devices, chunk runtime) is recorded with its kind when created and removed when destroyed,
// so a destroyed, made-up or wrong-kind pointer is refused by address, without being
// dereferenced. Entering a handle and beginning its destroy both happen under the registry's
// lock, so a destroy cannot free a handle between the check and the CallGate::Pass; a second
// destroy, or a call, that comes after the handle was removed is refused here.
//
// The error says why a handle is refused: "<what>: not a live handle: the chunk runtime handle
// was destroyed" for a handle destroyed earlier (the last kDestroyedRemembered destroyed
// addresses are remembered, by address and kind, nothing else), "... is a simulated devices
// handle, not a chunk runtime handle" for the wrong kind, "(never created, or destroyed long
// ago)" otherwise.
//
// Limit: the registry knows addresses only. A handle destroyed and followed by a new handle of
// the same kind at the same address is the new handle to the registry.
//
// Thread-safety: all functions are thread-safe.

#include <cstddef>
#include <functional>
#include <optional>

#include "base/status.h"
#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/call_gate.h"

namespace gpusched::capi {

enum class HandleKind {
  kDispatcher,
  kCancel,
  kSimDevices,
  kChunksRuntime,
  kChunksJob,
  kChunksPlan,  // issue 42: CN110955526B claim 2's stage plan across executors
};

// The kind as errors name it: "dispatcher", "cancel", "simulated devices", "chunk runtime",
// "chunk job".
const char* HandleKindName(HandleKind kind);

// How many destroyed addresses the registry remembers to say "was destroyed".
inline constexpr size_t kDestroyedRemembered = 4096;

// Records `h` as a live handle of `kind`.
void AddHandle(const void* h, HandleKind kind);
// Forgets `h`: later calls with it are refused ("was destroyed"). Call after its gate was
// closed, before freeing.
void RemoveHandle(const void* h);

// Checks that `h` is a live handle of `kind` and forgets it, in one step under the registry's
// lock, so of two frees of a handle with no gate (a chunk job) only one succeeds.
Status TakeHandle(const void* h, HandleKind kind, const char* what);

// Under the registry's lock: `what` names the argument in errors ("runtime"). InvalidArgument
// "<what>: not a live handle: <why>" when `h` is not a live handle of `kind`; else runs
// `body()` and returns what it returns. `h` is dereferenced in `body` only.
Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status()>& body);

// For handles with no gate (a chunk job belongs to one thread at a time): Ok when `h` is a live
// handle of `kind`, else the error of WithLiveHandle (a null `h` too).
Status CheckLive(const void* h, HandleKind kind, const char* what);

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
