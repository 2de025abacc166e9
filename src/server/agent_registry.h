#pragma once
// AgentRegistry (issue 40: split out of ControlPlane): the connected agents, one per node,
// with the instance each one says it is and where it connects from, and the probe daemon's
// view of them (CN115981827A claim 9): each node's last probe result and the nodes waiting
// for their first probe.
//
// It keeps the books only: closing a replaced channel, telling the scheduler whether a node
// is reachable and staging the changes are the control plane's. A second connection for a
// node replaces the first; the first's disconnection then removes nothing.
//
// Thread-safety: none. ControlPlane calls it under its lock (ControlPlane::mu_) only; the
// prober's `wake` is called with that lock held.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/node.h"
#include "server/agent_channel.h"

namespace gpusched::server {

class AgentRegistry {
 public:
  // The connected agent of a node (issue 37): its instance id and where it connects from.
  struct Instance {
    std::string instance, peer;
  };
  struct ProbeTarget {
    std::string node, address;
    bool first = false;  // registered since the prober attached, no probe result yet
  };

  // `channel` is now `node`'s agent, `instance` the id it registered with. Its earlier probe
  // result is forgotten; with a prober attached the node waits for its first probe and the
  // prober is woken. Returns the channel it replaced when that is another one (the caller
  // closes it), else null.
  std::shared_ptr<AgentChannel> Register(const std::string& node, std::string instance,
                                         std::shared_ptr<AgentChannel> channel);
  // `channel` of `node` went away. False (nothing changes) when the node's agent is another
  // channel by now (replaced) or none.
  bool Disconnected(const std::string& node, const AgentChannel* channel);
  // Every connection, taken out (a leader stepping down closes them).
  std::map<std::string, std::shared_ptr<AgentChannel>> TakeAll();
  // `node rm`: forgets the node's probe results (ForgetProbes), then its agent (Remove: the
  // channel it had, for the caller to close, or null).
  void ForgetProbes(const std::string& node);
  std::shared_ptr<AgentChannel> Remove(const std::string& node);

  // The node's agent, or null.
  std::shared_ptr<AgentChannel> Channel(const std::string& node) const;
  bool Connected(const std::string& node) const { return connections_.count(node) > 0; }
  // Whether `channel` is the node's agent now (a message of a replaced one is dropped).
  bool IsCurrent(const std::string& node, const AgentChannel* channel) const;
  // Issue 37: the peer of the node's connected agent when that agent is another instance
  // than `instance` (a new process under the same name), else none: an unknown or empty
  // instance on either side, the same instance reconnecting, or no agent connected.
  std::optional<std::string> OtherInstancePeer(const std::string& node,
                                               const std::string& instance) const;
  // Whether the node may get work: connected, not waiting for its first probe, and its last
  // probe (if any) succeeded.
  bool Reachable(const std::string& node) const;

  // ---- probe daemon ----
  // The connected nodes among `nodes`, in that order; `first_only`: those waiting for their
  // first probe.
  std::vector<ProbeTarget> ProbeTargets(const std::vector<core::NodeState>& nodes,
                                        bool first_only) const;
  void SetProbeResult(const std::string& node, bool reachable);
  // Attaches the prober (`wake` is called when a node registers); an empty one detaches it
  // and returns the nodes that waited for their first probe (now trusted by their
  // connection: the caller updates their reachability).
  std::set<std::string> AttachProber(std::function<void()> wake);

 private:
  std::map<std::string, std::shared_ptr<AgentChannel>> connections_;
  std::map<std::string, Instance> instances_;
  std::map<std::string, bool> probe_ok_;
  std::function<void()> probe_wake_;   // the attached prober, or empty
  std::set<std::string> probe_first_;  // registered, waiting for their first probe
};

}  // namespace gpusched::server
