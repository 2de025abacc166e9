#pragma once
// AgentChannel: the control plane's seam to one connected agent. The real one is a gRPC
// stream (AsyncAgentLink's calls); tests connect in-process fake agents (test_support) that record
// what the server sent and can stop reading, to play a hung peer.
//
// Contract: Send and Close never block on the peer (the caller holds the control plane's
// lock). Thread-safety: both may be called from any thread.

#include <string>

#include "server/agent_messages.h"

namespace gpusched::server {

class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Queues `m` for the agent (issue 40: in core types; the real channel builds the
  // gpusched.v1::ServerMessage, agent_convert.h). False when the channel is closed or its outbox is full (the
  // peer stopped reading): the message is dropped and the caller should Close the channel;
  // the agent reconciles when it reconnects.
  virtual bool Send(AgentOrder m) = 0;
  // Stops delivery without waiting: queued messages are dropped and a write blocked on the
  // peer is cancelled. Idempotent.
  virtual void Close() = 0;
  // Issue 35: the secret this registration handed the agent (Registered.log_read_key); the
  // server signs its log reads with it. "" = none (fakes).
  virtual std::string LogReadKey() const { return ""; }
  // Issue 37: where the agent connects from (gRPC's peer, "ipv4:10.0.0.5:41234"), to name it
  // to a second agent under the same name. "" = unknown (fakes).
  virtual std::string Peer() const { return ""; }
};

}  // namespace gpusched::server
