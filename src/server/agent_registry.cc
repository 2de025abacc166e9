// AgentRegistry: the connected agents and the probe daemon's view of them (issue 40).

#include "server/agent_registry.h"

#include <utility>

namespace gpusched::server {

std::shared_ptr<AgentChannel> AgentRegistry::Register(const std::string& node,
                                                      std::string instance,
                                                      std::shared_ptr<AgentChannel> channel) {
  std::shared_ptr<AgentChannel> replaced;
  if (auto old = connections_.find(node); old != connections_.end() && old->second != channel) {
    replaced = old->second;
  }
  instances_[node] = {std::move(instance), channel->Peer()};
  connections_[node] = std::move(channel);
  probe_ok_.erase(node);
  // CN115981827A claim 9: with a probe daemon, the node's address is probed before the node
  // gets its first task; without one, the fresh connection proves it for now.
  if (probe_wake_) {
    probe_first_.insert(node);
    probe_wake_();
  }
  return replaced;
}

bool AgentRegistry::Disconnected(const std::string& node, const AgentChannel* channel) {
  auto it = connections_.find(node);
  if (it == connections_.end() || it->second.get() != channel) return false;  // replaced
  connections_.erase(it);
  instances_.erase(node);
  return true;
}

std::map<std::string, std::shared_ptr<AgentChannel>> AgentRegistry::TakeAll() {
  std::map<std::string, std::shared_ptr<AgentChannel>> out;
  out.swap(connections_);
  return out;
}

void AgentRegistry::ForgetProbes(const std::string& node) {
  probe_ok_.erase(node);
  probe_first_.erase(node);
}

std::shared_ptr<AgentChannel> AgentRegistry::Remove(const std::string& node) {
  std::shared_ptr<AgentChannel> channel;
  if (auto c = connections_.find(node); c != connections_.end()) {
    channel = std::move(c->second);
    connections_.erase(c);
  }
  instances_.erase(node);
  return channel;
}

std::shared_ptr<AgentChannel> AgentRegistry::Channel(const std::string& node) const {
  auto c = connections_.find(node);
  return c == connections_.end() ? nullptr : c->second;
}

bool AgentRegistry::IsCurrent(const std::string& node, const AgentChannel* channel) const {
  auto c = connections_.find(node);
  return c != connections_.end() && c->second.get() == channel;
}

std::optional<std::string> AgentRegistry::OtherInstancePeer(const std::string& node,
                                                            const std::string& instance) const {
  const auto known = instances_.find(node);
  if (instance.empty() || known == instances_.end() || known->second.instance.empty() ||
      known->second.instance == instance || connections_.count(node) == 0) {
    return std::nullopt;
  }
  return known->second.peer;
}

bool AgentRegistry::Reachable(const std::string& node) const {
  auto probe = probe_ok_.find(node);
  return connections_.count(node) > 0 && probe_first_.count(node) == 0 &&
         (probe == probe_ok_.end() || probe->second);
}

std::vector<AgentRegistry::ProbeTarget> AgentRegistry::ProbeTargets(
    const std::vector<core::NodeState>& nodes, bool first_only) const {
  std::vector<ProbeTarget> out;
  for (const core::NodeState& n : nodes) {
    const bool first = probe_first_.count(n.name) > 0;
    if (connections_.count(n.name) > 0 && (first || !first_only)) {
      out.push_back({n.name, n.address, first});
    }
  }
  return out;
}

void AgentRegistry::SetProbeResult(const std::string& node, bool reachable) {
  probe_ok_[node] = reachable;
  probe_first_.erase(node);
}

std::set<std::string> AgentRegistry::AttachProber(std::function<void()> wake) {
  probe_wake_ = std::move(wake);
  if (probe_wake_) return {};
  // Nobody will probe them: back to trusting the connection.
  std::set<std::string> waiting = std::move(probe_first_);
  probe_first_.clear();
  return waiting;
}

}  // namespace gpusched::server
