#include "dispatch/c_api/handle_registry.h"

#include <mutex>
#include <string>
#include <vector>

namespace gpusched::capi {
namespace {

constexpr uint64_t kKindCount = 6;
constexpr uint64_t kGenerationMask = (uint64_t{1} << kGenerationBits) - 1;

// A handle value taken apart (the fields in the header).
struct Decoded {
  bool well_formed = false;  // odd, with a known kind
  HandleKind kind = HandleKind::kDispatcher;
  size_t slot = 0;
  uint64_t generation = 0;
};

uint64_t Encode(size_t slot, HandleKind kind, uint64_t generation) {
  return 1 | (static_cast<uint64_t>(kind) << 1) | (static_cast<uint64_t>(slot) << 4) |
         (generation << (4 + kSlotBits));
}

Decoded Decode(const void* h) {
  const auto v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
  Decoded d;
  d.well_formed = (v & 1) != 0 && ((v >> 1) & 7) < kKindCount;
  d.kind = static_cast<HandleKind>((v >> 1) & 7);
  d.slot = static_cast<size_t>((v >> 4) & (kMaxSlots - 1));
  d.generation = v >> (4 + kSlotBits);
  return d;
}

// One slot of the table: its object while a handle lives in it, and the generation of the last
// handle made in it (the live one, or the one destroyed last).
struct Slot {
  void* object = nullptr;
  HandleKind kind = HandleKind::kDispatcher;
  uint64_t generation = 0;
};

struct HandleTable {
  std::vector<Slot> slots;
  std::vector<size_t> free;  // freed slots; the last freed is reused first
};

std::mutex handles_mu;

HandleTable& Handles() {
  static auto* handles = new HandleTable;  // never destroyed: no exit race
  return *handles;
}

// REQUIRES: handles_mu held. The slot of `h` when `h` is the live handle in it, else null.
const Slot* LiveSlot(const HandleTable& r, const Decoded& d) {
  if (!d.well_formed || d.slot >= r.slots.size()) return nullptr;
  const Slot& s = r.slots[d.slot];
  if (s.object == nullptr || s.generation != d.generation || s.kind != d.kind) return nullptr;
  return &s;
}

// REQUIRES: handles_mu held. Why `h` is not a live handle of `kind`.
std::string WhyNotLive(const HandleTable& r, const Decoded& d, HandleKind kind) {
  const std::string wanted = std::string(HandleKindName(kind)) + " handle";
  if (const Slot* s = LiveSlot(r, d)) {
    return std::string("it is a ") + HandleKindName(s->kind) + " handle, not a " + wanted;
  }
  // Made by the registry once: its slot exists and has reached its generation since.
  const bool made = d.well_formed && d.slot < r.slots.size() &&
                    d.generation <= r.slots[d.slot].generation && d.generation != 0;
  if (made && d.kind == kind) return "the " + wanted + " was destroyed";
  if (made) return std::string("a destroyed ") + HandleKindName(d.kind) + " handle, not a " + wanted;
  return "no " + wanted + " (never created, or destroyed long ago)";
}

// REQUIRES: handles_mu held. Ok when `h` is a live handle of `kind`, else why not.
StatusOr<Slot*> LiveOrRefused(HandleTable& r, const void* h, HandleKind kind, const char* what) {
  const Decoded d = Decode(h);
  const Slot* s = LiveSlot(r, d);
  if (s != nullptr && s->kind == kind) return &r.slots[d.slot];
  return InvalidArgument(std::string(what) + ": not a live handle: " + WhyNotLive(r, d, kind));
}

// REQUIRES: handles_mu held.
void RemoveLocked(HandleTable& r, const void* h) {
  const Decoded d = Decode(h);
  if (LiveSlot(r, d) == nullptr) return;
  r.slots[d.slot].object = nullptr;  // the generation stays: `h` now reads "was destroyed"
  r.free.push_back(d.slot);
}

}  // namespace

const char* HandleKindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kDispatcher: return "dispatcher";
    case HandleKind::kCancel: return "cancel";
    case HandleKind::kSimDevices: return "simulated devices";
    case HandleKind::kChunksRuntime: return "chunk runtime";
    case HandleKind::kChunksJob: return "chunk job";
    case HandleKind::kChunksPlan: return "chunk plan";
  }
  return "unknown";
}

StatusOr<void*> AddHandle(void* object, HandleKind kind) {
  std::lock_guard lock(handles_mu);
  HandleTable& r = Handles();
  size_t slot = r.slots.size();
  if (!r.free.empty()) {
    slot = r.free.back();
    r.free.pop_back();
  } else if (slot == kMaxSlots) {
    return ResourceExhausted("handles: " + std::to_string(kMaxSlots) + " live already");
  } else {
    r.slots.emplace_back();
  }
  Slot& s = r.slots[slot];
  // The next generation; 0 is never made (so a value of generation 0 reads "never created").
  s.generation = (s.generation + 1) & kGenerationMask;
  if (s.generation == 0) s.generation = 1;
  s.object = object;
  s.kind = kind;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(Encode(slot, kind, s.generation)));
}

void RemoveHandle(const void* h) {
  std::lock_guard lock(handles_mu);
  RemoveLocked(Handles(), h);
}

StatusOr<void*> TakeHandle(const void* h, HandleKind kind, const char* what) {
  if (h == nullptr) return Null(what);
  std::lock_guard lock(handles_mu);
  HandleTable& r = Handles();
  GS_ASSIGN_OR_RETURN(Slot * s, LiveOrRefused(r, h, kind, what));
  void* object = s->object;
  RemoveLocked(r, h);
  return object;
}

Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status(void* object)>& body) {
  std::lock_guard lock(handles_mu);
  GS_ASSIGN_OR_RETURN(Slot * s, LiveOrRefused(Handles(), h, kind, what));
  return body(s->object);
}

}  // namespace gpusched::capi
