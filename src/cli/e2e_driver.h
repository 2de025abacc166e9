#pragma once
// Helpers the demo and `bench e2e` share: submit tasks to a LocalCluster over gRPC and poll
// their records.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/task.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/tls.h"

namespace gpusched::cli {

class E2eDriver {
 public:
  // `tls`: connect with TLS (nullptr or disabled: plaintext). `token`: the bearer token every
  // call carries ("" = none, for a server without authentication).
  explicit E2eDriver(const std::string& address, const rpc::ClientTls* tls = nullptr,
                     std::string token = "");
  StatusOr<uint64_t> Submit(const core::TaskSpec& spec, const std::string& idempotency_key = "");
  StatusOr<std::vector<::gpusched::v1::Task>> List(const std::string& state = "");
  // Whether any task is in `state`: one page of one task, so a poll costs the server the
  // same whether one task or thousands wait.
  StatusOr<bool> AnyIn(const std::string& state);
  // Counts of tasks by state, e.g. {"running": 3, ...}.
  StatusOr<std::map<std::string, int64_t>> CountByState();
  // One GetServerStatus call: a round trip that touches no scheduler state (bench e2e's
  // transport limit).
  Status Ping();
  // Polls until `n` agents are connected, or Unavailable after `timeout_ms`.
  Status WaitForNodes(int n, int64_t timeout_ms);

  // The same two calls started on `cq` (bench e2e's clients, many driven by one thread):
  // `ctx` is prepared here (deadline, token); the caller asks for the answer with Finish.
  std::unique_ptr<grpc::ClientAsyncResponseReader<::gpusched::v1::SubmitResponse>> StartSubmit(
      grpc::ClientContext& ctx, const ::gpusched::v1::SubmitRequest& req,
      grpc::CompletionQueue& cq);
  std::unique_ptr<grpc::ClientAsyncResponseReader<::gpusched::v1::ServerStatus>> StartPing(
      grpc::ClientContext& ctx, grpc::CompletionQueue& cq);

 private:
  // A call's deadline (`timeout` from now) and, with a token, its authorization header.
  void Prepare(grpc::ClientContext& ctx, std::chrono::seconds timeout) const;
  // One ListTasks call: tasks in `state` (all when "") with id > after_id, at most `limit`.
  StatusOr<::gpusched::v1::ListTasksResponse> ListPage(const std::string& state,
                                                       uint64_t after_id, int64_t limit);

  std::shared_ptr<grpc::Channel> channel_;
  std::string token_;
  std::unique_ptr<::gpusched::v1::Scheduler::Stub> stub_;
};

}  // namespace gpusched::cli
