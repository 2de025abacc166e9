#include "server/agent_link_service.h"

#include <iostream>

#include "rpc/convert.h"
#include "rpc/grpc_status.h"
#include "rpc/tls.h"

namespace gpusched::server {

grpc::Status AgentLinkService::CheckIdentity(grpc::ServerContext* ctx,
                                             const std::string& node) const {
  if (!require_client_cert_) return grpc::Status::OK;
  const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    std::cerr << "gpusched server: refused agent \"" << node << "\" from " << ctx->peer()
              << ": no client certificate\n";
    return {grpc::StatusCode::UNAUTHENTICATED,
            "agent \"" + node + "\" presented no client certificate; this server requires "
            "one from its CA: create it with `gpusched certs init DIR --agent " + node +
            "` and start the agent with --tls-dir DIR --name " + node};
  }
  std::vector<std::string> names;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  if (rpc::CertificateNamesNode(names, node)) return grpc::Status::OK;
  std::string named;
  for (const std::string& n : names) named += (named.empty() ? "" : ", ") + n;
  std::cerr << "gpusched server: refused agent \"" << node << "\" from " << ctx->peer()
            << ": its certificate names " << (named.empty() ? "nothing" : named) << "\n";
  return {grpc::StatusCode::PERMISSION_DENIED,
          "agent registered as \"" + node + "\" but its certificate names " +
              (named.empty() ? std::string("no node") : "\"" + named + "\"") +
              ": an agent may only register as the node its certificate names (--name must "
              "match the certificate's name)"};
}

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
  if (grpc::Status who = CheckIdentity(ctx, node); !who.ok()) return who;

  auto conn = std::make_shared<AgentConnection>(ctx, stream);
  v1::ServerMessage hello;
  v1::Registered* r = hello.mutable_registered();
  r->set_node_heartbeat_ms(cp.config().node_heartbeat_ms);
  r->set_task_heartbeat_ms(cp.config().task_heartbeat_ms);
  r->set_kill_grace_ms(cp.config().kill_grace_ms);
  r->set_allow_root_tasks(cp.config().allow_root_tasks);
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
    cp.PostAgentMessage(node, std::move(m), conn);
    m.Clear();
  }
  cp.AgentDisconnected(node, conn.get());
  conn->Close();
  conn->Join();  // here, on this handler's thread: never under the control plane's lock
  std::cerr << "gpusched server: agent " << node << " disconnected\n";
  return grpc::Status::OK;
}

}  // namespace gpusched::server
