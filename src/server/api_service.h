#pragma once
// ApiService: the gpusched.v1.Scheduler gRPC service (what the CLI and programs call). Every
// handler validates its request, calls the ControlPlane and maps Status to a gRPC status; no
// exception or bad request can take the server down.
//
// Submit is answered on the completion queue (async_submit.h), through PrepareSubmit and
// ControlPlane::PostSubmissions; every other call on gRPC's synchronous server.
//
// Every call but GetServerStatus is authenticated first (ControlPlane::Authenticate, from the
// `authorization` metadata; with authentication off, from the owner of the caller's loopback
// connection, peer_identity.h, never from `x-gpusched-user`) and checked
// against access.h; GetServerStatus is answered by standbys too, which hold no tokens, and
// tells only the servers' roles and addresses.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/control_plane.h"
#include "server/peer_identity.h"
#include "server/control_plane_gate.h"
#include "server/log_reader.h"

namespace gpusched::server {

class ApiService final : public v1::Scheduler::WithAsyncMethod_Submit<v1::Scheduler::Service> {
 public:
  // `status` answers GetServerStatus (leaders and standbys alike); every other call goes to
  // the gate's control plane, or is answered "not leader; leader is ADDR".
  ApiService(ControlPlaneGate& gate, std::function<v1::ServerStatus()> status)
      : gate_(gate), status_(std::move(status)) {}

  // Issue 35: with authentication off, callers are who `peers` proves their connections'
  // owners to be; the server listens on `host` (its --listen host: a numeric address, or ""
  // for every one) at `port` (bound). Until this is called every such caller is the control
  // plane's default_user. REQUIRES: `peers` outlives the service; called once.
  void SetPeerIdentity(const PeerIdentity* peers, std::string host, int port) {
    listen_host_ = std::move(host);
    listen_port_ = port;
    peers_.store(peers);
  }

  // Submit's first half: authenticates the caller and validates the spec, which is then
  // the caller's (user and team from its credentials, never from the request).
  struct SubmitPlan {
    std::shared_ptr<ControlPlane> cp;
    core::TaskSpec spec;
  };
  StatusOr<SubmitPlan> PrepareSubmit(grpc::ServerContext* ctx, const v1::SubmitRequest& req);
  grpc::Status GetTask(grpc::ServerContext*, const v1::GetTaskRequest*, v1::Task*) override;
  grpc::Status ListTasks(grpc::ServerContext*, const v1::ListTasksRequest*,
                         v1::ListTasksResponse*) override;
  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest*, v1::CancelResponse*) override;
  grpc::Status Watch(grpc::ServerContext*, const v1::WatchRequest*,
                     grpc::ServerWriter<v1::Task>*) override;
  grpc::Status Why(grpc::ServerContext*, const v1::WhyRequest*, v1::WhyResponse*) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                         v1::ListNodesResponse*) override;
  grpc::Status Cordon(grpc::ServerContext*, const v1::CordonRequest*, v1::NodeResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::NodeResponse*) override;
  grpc::Status RemoveNode(grpc::ServerContext*, const v1::RemoveNodeRequest*,
                          v1::RemoveNodeResponse*) override;
  grpc::Status Logs(grpc::ServerContext*, const v1::LogsRequest*, v1::LogsResponse*) override;
  grpc::Status GetServerStatus(grpc::ServerContext*, const v1::ServerStatusRequest*,
                               v1::ServerStatus*) override;
  grpc::Status CreateToken(grpc::ServerContext*, const v1::CreateTokenRequest*,
                           v1::CreateTokenResponse*) override;
  grpc::Status ListTokens(grpc::ServerContext*, const v1::ListTokensRequest*,
                          v1::ListTokensResponse*) override;
  grpc::Status RevokeToken(grpc::ServerContext*, const v1::RevokeTokenRequest*,
                           v1::RevokeTokenResponse*) override;
  grpc::Status SetQuota(grpc::ServerContext*, const v1::SetQuotaRequest*,
                        v1::SetQuotaResponse*) override;
  grpc::Status ListQuotas(grpc::ServerContext*, const v1::ListQuotasRequest*,
                          v1::ListQuotasResponse*) override;
  grpc::Status ListLearnedProfiles(grpc::ServerContext*, const v1::ListLearnedProfilesRequest*,
                                   v1::ListLearnedProfilesResponse*) override;
  grpc::Status RemoveQuota(grpc::ServerContext*, const v1::RemoveQuotaRequest*,
                           v1::RemoveQuotaResponse*) override;
  grpc::Status RemoveLearnedProfile(grpc::ServerContext*, const v1::RemoveLearnedProfileRequest*,
                                    v1::RemoveLearnedProfileResponse*) override;
  grpc::Status Backup(grpc::ServerContext*, const v1::BackupRequest*,
                      grpc::ServerWriter<v1::BackupChunk>*) override;
  grpc::Status ReloadConfig(grpc::ServerContext*, const v1::ReloadConfigRequest*,
                            v1::ReloadConfigResponse*) override;
  grpc::Status GetAccounting(grpc::ServerContext*, const v1::AccountingRequest*,
                             v1::AccountingResponse*) override;

 private:
  // The leader's control plane and the authenticated caller, or the status to answer.
  struct Entered {
    std::shared_ptr<ControlPlane> cp;
    Caller caller;
  };
  StatusOr<Entered> Enter(grpc::ServerContext* ctx);
  // Enter, then PermissionDenied naming `what` unless the caller is an admin.
  StatusOr<Entered> EnterAsAdmin(grpc::ServerContext* ctx, const std::string& what);
  // Enter, then InvalidArgument for task id 0, and PermissionDenied naming `what` unless the
  // caller is an admin or owns task `id` (NotFound when there is no such task).
  StatusOr<Entered> EnterForTask(grpc::ServerContext* ctx, uint64_t id, const std::string& what);

  // The account the caller's connection proves (issue 35; "" when unknown).
  std::string LocalUser(grpc::ServerContext* ctx) const;

  ControlPlaneGate& gate_;
  std::function<v1::ServerStatus()> status_;
  LogReader logs_;
  std::atomic<const PeerIdentity*> peers_{nullptr};  // set once, after the fields below
  std::string listen_host_;
  int listen_port_ = 0;
};

}  // namespace gpusched::server
