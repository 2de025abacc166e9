#pragma once
// AgentLinkService: the server end of gpusched.v1.AgentLink. One call per agent: the first
// message must register the node; then heartbeats and task status flow in while assignments,
// kills and acks flow out through an AgentConnection. When the stream ends the node becomes
// unreachable; its tasks are failed over by the liveness rules if it does not come back.
// A standby refuses the stream with "not leader; leader is ADDR"; the agent follows it.
//
// Agent identity (mutual TLS): with `require_client_cert` (the server runs with TLS) the
// stream must come with a client certificate the server verified against the cluster CA,
// and the node registered must be named by it (its CN or a DNS SAN): an agent can only
// register and report as its own node. Anything else is refused (UNAUTHENTICATED without a
// certificate, PERMISSION_DENIED for another node's) and logged with both names.

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/agent_connection.h"
#include "server/control_plane.h"
#include "server/control_plane_gate.h"

namespace gpusched::server {

class AgentLinkService final : public v1::AgentLink::Service {
 public:
  AgentLinkService(ControlPlaneGate& gate, bool require_client_cert)
      : gate_(gate), require_client_cert_(require_client_cert) {}
  grpc::Status Connect(grpc::ServerContext* ctx, AgentConnection::Stream* stream) override;

 private:
  // OK when the peer may register as `node` (always without require_client_cert_).
  grpc::Status CheckIdentity(grpc::ServerContext* ctx, const std::string& node) const;

  ControlPlaneGate& gate_;
  const bool require_client_cert_;
};

}  // namespace gpusched::server
