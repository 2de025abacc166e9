#include "dispatch/c_api/handle_registry.h"

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gpusched::capi {
namespace {

struct DestroyedHandle {
  HandleKind kind;
  uint64_t seq;  // which destroy of this address: older entries of `order` are stale
};

// Live handles, and the last kDestroyedRemembered destroyed ones (oldest first in `order`).
struct HandleTable {
  std::map<const void*, HandleKind> live;
  std::map<const void*, DestroyedHandle> destroyed;
  std::deque<std::pair<const void*, uint64_t>> order;
  uint64_t next_seq = 0;
};

std::mutex handles_mu;

HandleTable& Handles() {
  static auto* handles = new HandleTable;  // never destroyed: no exit race
  return *handles;
}

// REQUIRES: handles_mu held. Why `h` is not a live handle of `kind`.
std::string WhyNotLive(const HandleTable& r, const void* h, HandleKind kind) {
  const std::string wanted = std::string(HandleKindName(kind)) + " handle";
  auto it = r.live.find(h);
  if (it != r.live.end()) {
    return std::string("it is a ") + HandleKindName(it->second) + " handle, not a " + wanted;
  }
  auto gone = r.destroyed.find(h);
  if (gone != r.destroyed.end() && gone->second.kind == kind) return "the " + wanted + " was destroyed";
  if (gone != r.destroyed.end()) {
    return std::string("a destroyed ") + HandleKindName(gone->second.kind) + " handle, not a " + wanted;
  }
  return "no " + wanted + " (never created, or destroyed long ago)";
}

// REQUIRES: handles_mu held.
void RemoveLocked(HandleTable& r, const void* h) {
  auto it = r.live.find(h);
  if (it == r.live.end()) return;
  const uint64_t seq = r.next_seq++;
  r.destroyed[h] = DestroyedHandle{it->second, seq};
  r.order.emplace_back(h, seq);
  r.live.erase(it);
  while (r.order.size() > kDestroyedRemembered) {
    const auto [oldest, oldest_seq] = r.order.front();
    r.order.pop_front();
    auto gone = r.destroyed.find(oldest);
    if (gone != r.destroyed.end() && gone->second.seq == oldest_seq) r.destroyed.erase(gone);
  }
}

// REQUIRES: handles_mu held. Ok when `h` is a live handle of `kind`, else why not.
Status LiveOrRefused(const HandleTable& r, const void* h, HandleKind kind, const char* what) {
  auto it = r.live.find(h);
  if (it != r.live.end() && it->second == kind) return Status::Ok();
  return InvalidArgument(std::string(what) + ": not a live handle: " + WhyNotLive(r, h, kind));
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

void AddHandle(const void* h, HandleKind kind) {
  std::lock_guard lock(handles_mu);
  HandleTable& r = Handles();
  r.live[h] = kind;
  r.destroyed.erase(h);  // (its entry in `order` is stale now, skipped when it comes up)
}

void RemoveHandle(const void* h) {
  std::lock_guard lock(handles_mu);
  RemoveLocked(Handles(), h);
}

Status TakeHandle(const void* h, HandleKind kind, const char* what) {
  if (h == nullptr) return Null(what);
  std::lock_guard lock(handles_mu);
  HandleTable& r = Handles();
  GS_RETURN_IF_ERROR(LiveOrRefused(r, h, kind, what));
  RemoveLocked(r, h);
  return Status::Ok();
}

Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status()>& body) {
  std::lock_guard lock(handles_mu);
  GS_RETURN_IF_ERROR(LiveOrRefused(Handles(), h, kind, what));
  return body();
}

Status CheckLive(const void* h, HandleKind kind, const char* what) {
  if (h == nullptr) return Null(what);
  return WithLiveHandle(h, kind, what, [] { return Status::Ok(); });
}

}  // namespace gpusched::capi
