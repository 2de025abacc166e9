#pragma once
// ControlPlaneGate: which ControlPlane serves the API right now. A single server (SQLite or
// memory store) is always the leader. In a highly available control plane only the elected
// leader has one; a standby answers every call with Unavailable "not leader; leader is ADDR"
// (or why none is known; rpc/leader_hint.h), which clients follow (cli/client.h, the
// agent's link loop).
//
// Callers hold the shared_ptr for the length of one call (or one agent stream); a deposed
// leader's ControlPlane lives until the last of them returns.
//
// Thread-safety: every method is safe from any thread.

#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "rpc/leader_hint.h"

namespace gpusched::server {

class ControlPlane;

class ControlPlaneGate {
 public:
  // The leader's control plane, or Unavailable naming the leader.
  StatusOr<std::shared_ptr<ControlPlane>> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (cp_) return cp_;
    return Unavailable(rpc::NotLeaderMessage(leader_, detail_));
  }
  void SetLeader(std::shared_ptr<ControlPlane> cp, std::string self) {
    std::lock_guard<std::mutex> lock(mu_);
    cp_ = std::move(cp);
    leader_ = std::move(self);
    detail_.clear();
  }
  // Becomes (or stays) a standby; returns the control plane this server led, if any.
  std::shared_ptr<ControlPlane> SetStandby(std::string leader, std::string detail) {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = std::move(leader);
    detail_ = std::move(detail);
    return std::move(cp_);
  }
  bool leading() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cp_ != nullptr;
  }
  std::string leader() const {
    std::lock_guard<std::mutex> lock(mu_);
    return leader_;
  }
  std::string detail() const {
    std::lock_guard<std::mutex> lock(mu_);
    return detail_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<ControlPlane> cp_;
  std::string leader_;
  std::string detail_;
};

}  // namespace gpusched::server
