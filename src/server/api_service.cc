#include "server/api_service.h"

#include <set>

#include "rpc/convert.h"
#include "rpc/grpc_status.h"

namespace gpusched::server {
namespace {

grpc::Status RequireId(uint64_t id) {
  if (id == 0) return {grpc::StatusCode::INVALID_ARGUMENT, "id: must be a task id >= 1"};
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ApiService::Submit(grpc::ServerContext*, const v1::SubmitRequest* req,
                                v1::SubmitResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  auto spec = rpc::TaskSpecFromProto(req->spec());
  if (!spec.ok()) return rpc::ToGrpc(spec.status());
  auto id = cp.Submit(std::move(spec).value(), req->idempotency_key());
  if (!id.ok()) return rpc::ToGrpc(id.status());
  resp->set_id(id->value());
  return grpc::Status::OK;
}

grpc::Status ApiService::GetTask(grpc::ServerContext*, const v1::GetTaskRequest* req,
                                 v1::Task* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (auto s = RequireId(req->id()); !s.ok()) return s;
  auto t = cp.GetTask(req->id(), true);
  if (!t.ok()) return rpc::ToGrpc(t.status());
  *resp = std::move(t).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::ListTasks(grpc::ServerContext*, const v1::ListTasksRequest* req,
                                   v1::ListTasksResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  std::optional<core::TaskState> state;
  if (!req->state().empty()) {
    auto s = rpc::TaskStateFromName(req->state(), "state");
    if (!s.ok()) return rpc::ToGrpc(s.status());
    state = *s;
  }
  if (req->limit() < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "limit: must be >= 0, got " + std::to_string(req->limit())};
  }
  auto page = cp.ListTasks(state, req->after_id(), static_cast<size_t>(req->limit()));
  if (!page.ok()) return rpc::ToGrpc(page.status());
  for (v1::Task& t : page->tasks) *resp->add_tasks() = std::move(t);
  resp->set_next_after_id(page->next_after_id);
  return grpc::Status::OK;
}

grpc::Status ApiService::Cancel(grpc::ServerContext*, const v1::CancelRequest* req,
                                v1::CancelResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (auto s = RequireId(req->id()); !s.ok()) return s;
  auto t = cp.Cancel(req->id());
  if (!t.ok()) return rpc::ToGrpc(t.status());
  *resp->mutable_task() = std::move(t).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                               grpc::ServerWriter<v1::Task>* writer) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  const std::set<uint64_t> wanted(req->ids().begin(), req->ids().end());
  auto send = [&](uint64_t id) {
    auto t = cp.GetTask(id, false);
    return !t.ok() || writer->Write(*t);
  };
  std::vector<uint64_t> ids;
  bool everything = false;
  uint64_t version = cp.WaitForChanges(UINT64_MAX - 1, 0, ids, everything);
  if (wanted.empty()) {
    for (const v1::Task& t : cp.RecentTasks()) {
      if (!writer->Write(t)) return grpc::Status::OK;
    }
  } else {
    for (uint64_t id : wanted) {
      auto t = cp.GetTask(id, false);
      if (!t.ok()) return rpc::ToGrpc(t.status());
      if (!writer->Write(*t)) return grpc::Status::OK;
    }
  }
  while (!ctx->IsCancelled()) {
    // A deposed leader's stream ends, so the watcher follows the new leader.
    if (auto now = gate_.Get(); !now.ok() || now->get() != &cp) {
      return rpc::ToGrpc(now.ok() ? Unavailable("leadership changed; watch again") : now.status());
    }
    ids.clear();
    version = cp.WaitForChanges(version, 500, ids, everything);
    if (everything) {
      for (const v1::Task& t : cp.RecentTasks()) {
        if ((wanted.empty() || wanted.count(t.id())) && !writer->Write(t)) return grpc::Status::OK;
      }
      continue;
    }
    for (uint64_t id : ids) {
      if ((wanted.empty() || wanted.count(id)) && !send(id)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::Why(grpc::ServerContext*, const v1::WhyRequest* req,
                             v1::WhyResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (auto s = RequireId(req->id()); !s.ok()) return s;
  auto w = cp.Why(req->id());
  if (!w.ok()) return rpc::ToGrpc(w.status());
  *resp = std::move(w).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                   v1::ListNodesResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  for (v1::Node& n : cp.ListNodes()) *resp->add_nodes() = std::move(n);
  return grpc::Status::OK;
}

grpc::Status ApiService::Cordon(grpc::ServerContext*, const v1::CordonRequest* req,
                                v1::NodeResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (req->node().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "node: must be set"};
  auto n = cp.Cordon(req->node(), req->cordon());
  if (!n.ok()) return rpc::ToGrpc(n.status());
  *resp->mutable_node() = std::move(n).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::Drain(grpc::ServerContext*, const v1::DrainRequest* req,
                               v1::NodeResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (req->node().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "node: must be set"};
  auto n = cp.Drain(req->node());
  if (!n.ok()) return rpc::ToGrpc(n.status());
  *resp->mutable_node() = std::move(n).value();
  return grpc::Status::OK;
}

// The log lives on the agent that ran the task's latest attempt; the server reads it there.
grpc::Status ApiService::Logs(grpc::ServerContext*, const v1::LogsRequest* req,
                              v1::LogsResponse* resp) {
  auto gate = gate_.Get();
  if (!gate.ok()) return rpc::ToGrpc(gate.status());
  ControlPlane& cp = **gate;
  if (auto s = RequireId(req->id()); !s.ok()) return s;
  auto out = logs_.Read(cp, req->id(), req->offset(), req->max_bytes());
  if (!out.ok()) return rpc::ToGrpc(out.status());
  *resp = std::move(out).value();
  return grpc::Status::OK;
}

}  // namespace gpusched::server

namespace gpusched::server {

grpc::Status ApiService::GetServerStatus(grpc::ServerContext*, const v1::ServerStatusRequest*,
                                         v1::ServerStatus* resp) {
  *resp = status_();
  return grpc::Status::OK;
}

}  // namespace gpusched::server
