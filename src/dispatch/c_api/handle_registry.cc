#include "dispatch/c_api/handle_registry.h"

#include <map>
#include <mutex>
#include <string>

namespace gpusched::capi {
namespace {

std::mutex handles_mu;

std::map<const void*, HandleKind>& Handles() {
  static auto* handles = new std::map<const void*, HandleKind>;  // never destroyed: no exit race
  return *handles;
}

}  // namespace

void AddHandle(const void* h, HandleKind kind) {
  std::lock_guard lock(handles_mu);
  Handles()[h] = kind;
}

void RemoveHandle(const void* h) {
  std::lock_guard lock(handles_mu);
  Handles().erase(h);
}

Status WithLiveHandle(const void* h, HandleKind kind, const char* what,
                      const std::function<Status()>& body) {
  std::lock_guard lock(handles_mu);
  auto it = Handles().find(h);
  if (it == Handles().end() || it->second != kind) {
    return InvalidArgument(std::string(what) + ": not a live handle (destroyed, or never created)");
  }
  return body();
}

}  // namespace gpusched::capi
