#include "cli/e2e_driver.h"

#include <algorithm>
#include <map>
#include <thread>

#include "rpc/channel.h"
#include "rpc/convert.h"
#include "rpc/grpc_status.h"

namespace gpusched::cli {

E2eDriver::E2eDriver(const std::string& address, const rpc::ClientTls* tls, std::string token)
    : channel_(rpc::MakeChannel(address, false, tls)),
      token_(std::move(token)),
      stub_(::gpusched::v1::Scheduler::NewStub(channel_)) {}

void E2eDriver::Prepare(grpc::ClientContext& ctx, std::chrono::seconds timeout) const {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token_.empty()) ctx.AddMetadata("authorization", "Bearer " + token_);
}

StatusOr<uint64_t> E2eDriver::Submit(const core::TaskSpec& spec,
                                     const std::string& idempotency_key) {
  ::gpusched::v1::SubmitRequest req;
  rpc::TaskSpecToProto(spec, req.mutable_spec());
  req.set_idempotency_key(idempotency_key);
  ::gpusched::v1::SubmitResponse resp;
  grpc::ClientContext ctx;
  Prepare(ctx, std::chrono::seconds(30));
  GS_RETURN_IF_ERROR(rpc::FromGrpc(stub_->Submit(&ctx, req, &resp)));
  return resp.id();
}

Status E2eDriver::Ping() {
  ::gpusched::v1::ServerStatus resp;
  grpc::ClientContext ctx;
  Prepare(ctx, std::chrono::seconds(30));
  return rpc::FromGrpc(stub_->GetServerStatus(&ctx, {}, &resp));
}

std::unique_ptr<grpc::ClientAsyncResponseReader<::gpusched::v1::SubmitResponse>>
E2eDriver::StartSubmit(grpc::ClientContext& ctx, const ::gpusched::v1::SubmitRequest& req,
                       grpc::CompletionQueue& cq) {
  Prepare(ctx, std::chrono::seconds(30));
  return stub_->AsyncSubmit(&ctx, req, &cq);
}

std::unique_ptr<grpc::ClientAsyncResponseReader<::gpusched::v1::ServerStatus>>
E2eDriver::StartPing(grpc::ClientContext& ctx, grpc::CompletionQueue& cq) {
  Prepare(ctx, std::chrono::seconds(30));
  return stub_->AsyncGetServerStatus(&ctx, {}, &cq);
}

StatusOr<::gpusched::v1::ListTasksResponse> E2eDriver::ListPage(const std::string& state,
                                                                 uint64_t after_id,
                                                                 int64_t limit) {
  ::gpusched::v1::ListTasksRequest req;
  req.set_state(state);
  req.set_after_id(after_id);
  req.set_limit(limit);
  ::gpusched::v1::ListTasksResponse resp;
  grpc::ClientContext ctx;
  Prepare(ctx, std::chrono::seconds(30));
  GS_RETURN_IF_ERROR(rpc::FromGrpc(stub_->ListTasks(&ctx, req, &resp)));
  return resp;
}

StatusOr<std::vector<::gpusched::v1::Task>> E2eDriver::List(const std::string& state) {
  std::vector<::gpusched::v1::Task> out;
  for (uint64_t after = 0;;) {  // every page
    GS_ASSIGN_OR_RETURN(::gpusched::v1::ListTasksResponse resp, ListPage(state, after, 10'000));
    out.insert(out.end(), resp.tasks().begin(), resp.tasks().end());
    if (resp.next_after_id() == 0) return out;
    after = resp.next_after_id();
  }
}

StatusOr<bool> E2eDriver::AnyIn(const std::string& state) {
  GS_ASSIGN_OR_RETURN(::gpusched::v1::ListTasksResponse resp, ListPage(state, 0, 1));
  return resp.tasks_size() > 0;
}

StatusOr<std::map<std::string, int64_t>> E2eDriver::CountByState() {
  GS_ASSIGN_OR_RETURN(std::vector<::gpusched::v1::Task> tasks, List());
  std::map<std::string, int64_t> out;
  for (const auto& t : tasks) ++out[t.state()];
  return out;
}

Status E2eDriver::WaitForNodes(int n, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    ::gpusched::v1::ListNodesResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx, std::chrono::seconds(5));
    int connected = 0;
    if (stub_->ListNodes(&ctx, {}, &resp).ok()) {
      for (const auto& node : resp.nodes()) connected += node.connected() && node.available();
    }
    if (connected >= n) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("only " + std::to_string(connected) + " of " + std::to_string(n) +
                         " agents connected");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll period
  }
}

}  // namespace gpusched::cli
