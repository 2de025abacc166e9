#pragma once
// AgentLinkService: the server end of gpusched.v1.AgentLink. One call per agent: the first
// message must register the node; then heartbeats and task status flow in while assignments,
// kills and acks flow out through an AgentConnection. When the stream ends the node becomes
// unreachable; its tasks are failed over by the liveness rules if it does not come back.
// A standby refuses the stream with "not leader; leader is ADDR"; the agent follows it.

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/agent_connection.h"
#include "server/control_plane.h"
#include "server/control_plane_gate.h"

namespace gpusched::server {

class AgentLinkService final : public v1::AgentLink::Service {
 public:
  explicit AgentLinkService(ControlPlaneGate& gate) : gate_(gate) {}
  grpc::Status Connect(grpc::ServerContext* ctx, AgentConnection::Stream* stream) override;

 private:
  ControlPlaneGate& gate_;
};

}  // namespace gpusched::server
