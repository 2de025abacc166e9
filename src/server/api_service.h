#pragma once
// ApiService: the gpusched.v1.Scheduler gRPC service (what the CLI and programs call). Every
// handler validates its request, calls the ControlPlane and maps Status to a gRPC status; no
// exception or bad request can take the server down.

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/control_plane.h"
#include "server/log_reader.h"

namespace gpusched::server {

class ApiService final : public v1::Scheduler::Service {
 public:
  explicit ApiService(ControlPlane& cp) : cp_(cp), logs_(cp) {}

  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitRequest*, v1::SubmitResponse*) override;
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
  grpc::Status Logs(grpc::ServerContext*, const v1::LogsRequest*, v1::LogsResponse*) override;

 private:
  ControlPlane& cp_;
  LogReader logs_;
};

}  // namespace gpusched::server
