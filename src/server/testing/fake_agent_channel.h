#pragma once
// FakeAgentChannel: an in-process agent connection for control-plane tests (as Envoy tests
// against fake upstreams). It records what the server sends; `capacity` plays an agent that
// stopped reading (Send fails once that many messages are queued).
//
// Thread-safety: every method is safe from any thread.

#include <mutex>
#include <variant>
#include <vector>

#include "server/agent_channel.h"

namespace gpusched::server::testing {

class FakeAgentChannel final : public AgentChannel {
 public:
  explicit FakeAgentChannel(size_t capacity = SIZE_MAX) : capacity_(capacity) {}

  bool Send(AgentOrder m) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || sent_.size() >= capacity_) return false;
    sent_.push_back(std::move(m));
    return true;
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  std::vector<AgentOrder> sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // The assignments, kills and acks sent so far, as (task, attempt) pairs.
  std::vector<std::pair<uint64_t, int64_t>> assigns() const { return Refs(Kind::kAssign); }
  std::vector<std::pair<uint64_t, int64_t>> kills() const { return Refs(Kind::kKill); }
  std::vector<std::pair<uint64_t, int64_t>> acks() const { return Refs(Kind::kAck); }

 private:
  enum class Kind { kAssign, kKill, kAck };
  std::vector<std::pair<uint64_t, int64_t>> Refs(Kind kind) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<uint64_t, int64_t>> out;
    for (const AgentOrder& m : sent_) {
      if (const auto* a = std::get_if<TaskAssignment>(&m); a && kind == Kind::kAssign) {
        out.emplace_back(a->id.value(), a->attempt);
      } else if (const auto* k = std::get_if<TaskKill>(&m); k && kind == Kind::kKill) {
        out.emplace_back(k->id.value(), k->attempt);
      } else if (const auto* ack = std::get_if<StatusAck>(&m); ack && kind == Kind::kAck) {
        out.emplace_back(ack->id.value(), ack->attempt);
      }
    }
    return out;
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<AgentOrder> sent_;
  bool closed_ = false;
};

}  // namespace gpusched::server::testing
