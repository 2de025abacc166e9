#pragma once
// The registry of live C handles. Every handle of gpusched_c.h and gpusched_chunks_c.h
// (dispatcher, cancel, simulated devices, chunk runtime, chunk job, chunk plan) is a value the
// registry made, not the object's address: it packs a slot of the registry's table, the kind
// and the slot's generation (the fields below). A destroyed, made-up or wrong-kind handle is
// refused without anything being dereferenced; entry points reach their object only through
// the registry. Entering a handle and beginning its destroy both happen under the registry's
// lock, so a destroy cannot free an object between the check and the CallGate::Pass; a second
// destroy, or a call, that comes after the handle was removed is refused here.
//
// A freed slot is reused (the most recently freed first) only under the next generation, so a
// handle destroyed and followed by a new handle in the same slot is still refused as destroyed,
// and the new handle is a different value. Remaining limit: generations wrap after
// 2^kGenerationBits reuses of one slot; a handle kept across that many destroys of its slot
// could then name a new object.
//
// The error says why a handle is refused: "<what>: not a live handle: the chunk runtime handle
// was destroyed" for a handle whose slot has since been freed or reused, "... is a simulated
// devices handle, not a chunk runtime handle" for the wrong kind (live or destroyed), "(never
// created, or destroyed long ago)" for a value the registry never made.
//
// Thread-safety: all functions are thread-safe.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
// "chunk job", "chunk plan".
const char* HandleKindName(HandleKind kind);

// A handle value's fields, lowest bit first: a 1 (so the value is odd: never null, never the
// address of an object aligned to 2 or more), 3 bits of kind, kSlotBits of slot, the rest
// generation.
inline constexpr int kSlotBits = 24;
inline constexpr int kGenerationBits = 64 - 4 - kSlotBits;
inline constexpr size_t kMaxSlots = size_t{1} << kSlotBits;
static_assert(sizeof(void*) == 8, "a handle value packs slot and generation in 64 bits");

// Records `object` (not owned) as a live handle of `kind` and returns its handle value.
// ResourceExhausted when kMaxSlots handles are live.
StatusOr<void*> AddHandle(void* object, HandleKind kind);

// Forgets handle `h`: later calls with it are refused ("was destroyed"). Call after its gate
// was closed, before freeing its object.
void RemoveHandle(const void* h);

// Checks that `h` is a live handle of `kind` and forgets it, in one step under the registry's
// lock, so of two frees of a handle with no gate (a chunk job) only one succeeds. Returns the
// object, now the caller's to free.
StatusOr<void*> TakeHandle(const void* h, HandleKind kind, const char* what);

// Under the registry's lock: `what` names the argument in errors ("runtime"). InvalidArgument
// "<what>: not a live handle: <why>" when `h` is not a live handle of `kind`; else runs
// `body(object)` and returns what it returns.
Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status(void* object)>& body);

// Hands `object` to the registry and returns its handle, typed as the C API's handle type `H`
// (which callers never dereference). On error `object` is freed.
template <typename H, typename T>
StatusOr<H*> NewHandle(std::unique_ptr<T> object, HandleKind kind) {
  GS_ASSIGN_OR_RETURN(void* h, AddHandle(object.get(), kind));
  object.release();  // the caller's destroy frees it
  return static_cast<H*>(h);
}

// For handles with no gate (a chunk job belongs to one thread at a time): the object of live
// handle `h` of `kind`, else the error of WithLiveHandle (a null `h` too).
template <typename T>
StatusOr<T*> CheckLive(const void* h, HandleKind kind, const char* what) {
  if (h == nullptr) return Null(what);
  T* object = nullptr;
  GS_RETURN_IF_ERROR(WithLiveHandle(h, kind, what, [&](void* o) {
    object = static_cast<T*>(o);
    return Status::Ok();
  }));
  return object;
}

// Checks that `h` is a live handle of `kind`, sets `object` to its object and passes the
// object's gate into `pass`: while `pass` lives, a destroy of `h` waits.
template <typename T>
Status Enter(const void* h, HandleKind kind, const char* what, const char* call,
             std::optional<CallGate::Pass>& pass, T*& object, bool allowed_while_closing = false) {
  if (h == nullptr) return Null(what);
  return WithLiveHandle(h, kind, what, [&](void* o) {
    object = static_cast<T*>(o);
    pass.emplace(object->gate, call, allowed_while_closing);
    return pass->status();
  });
}

// The first half of a destroy: checks that `h` is live, begins closing its object's gate
// (refusing new calls, and a second destroy, from now on) under the registry's lock, then
// waits for the calls in flight, and returns the object. The caller then either removes `h`
// and frees the object, or reopens its gate.
template <typename T>
StatusOr<T*> CloseHandle(const void* h, HandleKind kind, const char* what, const char* call) {
  if (h == nullptr) return Null(what);
  T* object = nullptr;
  GS_RETURN_IF_ERROR(WithLiveHandle(h, kind, what, [&](void* o) {
    object = static_cast<T*>(o);
    return object->gate.BeginClose(call);
  }));
  object->gate.WaitIdle();
  return object;
}

}  // namespace gpusched::capi
