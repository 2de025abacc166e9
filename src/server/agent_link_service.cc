#include "server/agent_link_service.h"

#include <iostream>

#include "rpc/convert.h"
#include "rpc/grpc_status.h"

namespace gpusched::server {

grpc::Status AgentLinkService::Connect(grpc::ServerContext* ctx,
                                       AgentConnection::Stream* stream) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  std::shared_ptr<ControlPlane> cp_holder = std::move(gate).value();
  ControlPlane& cp = *cp_holder;
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "the first message on AgentLink.Connect must be register"};
  }
  auto spec = rpc::NodeSpecFromProto(first.register_());
  if (!spec.ok()) return rpc::ToGrpc(spec.status());
  const std::string node = spec->name;

  auto conn = std::make_shared<AgentConnection>(ctx, stream);
  v1::ServerMessage hello;
  v1::Registered* r = hello.mutable_registered();
  r->set_node_heartbeat_ms(cp.config().node_heartbeat_ms);
  r->set_task_heartbeat_ms(cp.config().task_heartbeat_ms);
  r->set_kill_grace_ms(cp.config().kill_grace_ms);
  conn->Send(std::move(hello));
  Status s = cp.AgentRegistered(first.register_(), conn);
  if (!s.ok()) {
    conn->Close();
    conn->Join();
    return rpc::ToGrpc(s);
  }
  std::cerr << "gpusched server: agent " << node << " connected (" << spec->gpus.size()
            << " GPUs, " << spec->address << ")\n";
  v1::AgentMessage m;
  while (stream->Read(&m)) {
    if (m.has_register_()) continue;  // only the first one counts
    cp.AgentMessage(node, m, conn);
  }
  cp.AgentDisconnected(node, conn.get());
  conn->Close();
  conn->Join();  // here, on this handler's thread: never under the control plane's lock
  std::cerr << "gpusched server: agent " << node << " disconnected\n";
  return grpc::Status::OK;
}

}  // namespace gpusched::server
