#include "server/api_service.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/task_validation.h"
#include "rpc/convert.h"
#include "rpc/grpc_status.h"
#include "server/access.h"
#include "server/accounting.h"
#include "server/api_convert.h"
#include "server/task_filter.h"
#include "server/tokens.h"

namespace gpusched::server {
namespace {


Status RequireId(uint64_t id) {
  if (id == 0) return InvalidArgument("id: must be a task id >= 1");
  return Status::Ok();
}

std::string Metadata(const grpc::ServerContext* ctx, const std::string& key) {
  auto it = ctx->client_metadata().find(key);
  return it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
}

void TokenInfoToProto(const store::TokenRecord& r, v1::TokenInfo* p) {
  p->set_id(r.id);
  p->set_user(r.user);
  p->set_team(r.team);
  p->set_admin(r.admin);
  p->set_created_ms(r.created_ms);
  p->set_agent_node(r.agent_node);
}

}  // namespace

std::string ApiService::LocalUser(grpc::ServerContext* ctx) const {
  const PeerIdentity* peers = peers_.load();
  if (peers == nullptr) return "";
  const std::optional<TcpEndpoint> client = ParseGrpcPeer(ctx->peer());
  if (!client) return "";
  return peers->UserOf(*client, {listen_host_, static_cast<uint16_t>(listen_port_)});
}

StatusOr<ApiService::Entered> ApiService::Enter(grpc::ServerContext* ctx) {
  GS_ASSIGN_OR_RETURN(std::shared_ptr<ControlPlane> cp, gate_.Get());
  const std::string local_user = cp->auth_enabled() ? "" : LocalUser(ctx);
  GS_ASSIGN_OR_RETURN(Caller caller, cp->Authenticate(Metadata(ctx, "authorization"), local_user));
  return Entered{std::move(cp), std::move(caller)};
}

StatusOr<ApiService::Entered> ApiService::EnterAsAdmin(grpc::ServerContext* ctx,
                                                       const std::string& what) {
  GS_ASSIGN_OR_RETURN(Entered entered, Enter(ctx));
  GS_RETURN_IF_ERROR(RequireAdmin(entered.caller, what));
  return entered;
}

StatusOr<ApiService::Entered> ApiService::EnterForTask(grpc::ServerContext* ctx, uint64_t id,
                                                       const std::string& what) {
  GS_ASSIGN_OR_RETURN(Entered entered, Enter(ctx));
  GS_RETURN_IF_ERROR(RequireId(id));
  if (!entered.caller.admin) {
    GS_ASSIGN_OR_RETURN(const TaskView task, entered.cp->GetTask(id));
    GS_RETURN_IF_ERROR(RequireOwnerOrAdmin(entered.caller, TaskToProto(task), what));
  }
  return entered;
}

StatusOr<ApiService::SubmitPlan> ApiService::PrepareSubmit(grpc::ServerContext* ctx,
                                                           const v1::SubmitRequest& req) {
  GS_ASSIGN_OR_RETURN(Entered entered, Enter(ctx));
  GS_ASSIGN_OR_RETURN(core::TaskSpec spec, rpc::TaskSpecFromProto(req.spec()));
  GS_RETURN_IF_ERROR(core::CheckSubmittedEnv(spec));  // GPUSCHED_* is the product's
  spec.user = entered.caller.user;  // who submits is the server's to say, never the client's
  spec.team = entered.caller.team;
  return SubmitPlan{std::move(entered.cp), std::move(spec)};
}

grpc::Status ApiService::GetTask(grpc::ServerContext* ctx, const v1::GetTaskRequest* req,
                                 v1::Task* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  if (auto s = RequireId(req->id()); !s.ok()) return rpc::ToGrpc(s);
  auto t = cp.GetTask(req->id());
  if (!t.ok()) return rpc::ToGrpc(t.status());
  *resp = TaskToProto(*t, /*with_history=*/true);
  RedactForCaller(entered->caller, cp.config().private_data, resp);
  return grpc::Status::OK;
}

grpc::Status ApiService::ListTasks(grpc::ServerContext* ctx, const v1::ListTasksRequest* req,
                                   v1::ListTasksResponse* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  std::optional<core::TaskState> state;
  if (!req->state().empty()) {
    auto s = rpc::TaskStateFromName(req->state(), "state");
    if (!s.ok()) return rpc::ToGrpc(s.status());
    state = *s;
  }
  std::set<core::TaskState> states;
  for (const std::string& name : req->states()) {
    auto s = rpc::TaskStateFromName(name, "states");
    if (!s.ok()) return rpc::ToGrpc(s.status());
    states.insert(*s);
  }
  if (req->limit() < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "limit: must be >= 0, got " + std::to_string(req->limit())};
  }
  if (state && !states.empty()) states.insert(*state);
  auto page = states.empty()
                  ? cp.ListTasks(state, req->after_id(), static_cast<size_t>(req->limit()))
                  : cp.ListTasksIn(states, req->after_id(), static_cast<size_t>(req->limit()));
  if (!page.ok()) return rpc::ToGrpc(page.status());
  const TaskFilter filter{req->user(), req->team(), req->name(), req->node()};
  for (const TaskView& view : page->tasks) {
    v1::Task t = TaskToProto(view);
    if (!MatchesTaskFilter(t, filter)) continue;  // a short page; the client goes on after it
    RedactForCaller(entered->caller, cp.config().private_data, &t);
    *resp->add_tasks() = std::move(t);
  }
  resp->set_next_after_id(page->next_after_id);
  return grpc::Status::OK;
}

grpc::Status ApiService::Cancel(grpc::ServerContext* ctx, const v1::CancelRequest* req,
                                v1::CancelResponse* resp) {
  auto entered = EnterForTask(ctx, req->id(), "cancel task " + std::to_string(req->id()));
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  auto t = cp.Cancel(req->id());
  if (!t.ok()) return rpc::ToGrpc(t.status());
  *resp->mutable_task() = TaskToProto(*t);
  RedactForCaller(entered->caller, cp.config().private_data, resp->mutable_task());
  return grpc::Status::OK;
}

grpc::Status ApiService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                               grpc::ServerWriter<v1::Task>* writer) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  // Each open Watch holds a thread of this server: counted against stream_limit(_per_user).
  StatusOr<StreamLimiter::Slot> slot = cp.streams().Acquire(entered->caller.user);
  if (!slot.ok()) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, slot.status().message());
  }
  const std::set<uint64_t> wanted(req->ids().begin(), req->ids().end());
  // Every task written goes through RedactForCaller.
  auto write = [&, caller = entered->caller](v1::Task t) {
    RedactForCaller(caller, cp.config().private_data, &t);
    return writer->Write(t);
  };
  auto send = [&](uint64_t id) {
    auto t = cp.GetTask(id);
    return !t.ok() || write(TaskToProto(*t));
  };
  std::vector<uint64_t> ids;
  bool everything = false;
  uint64_t version = cp.WaitForChanges(UINT64_MAX - 1, 0, ids, everything);
  if (wanted.empty()) {
    for (const TaskView& t : cp.RecentTasks()) {
      if (!write(TaskToProto(t))) return grpc::Status::OK;
    }
  } else {
    for (uint64_t id : wanted) {
      auto t = cp.GetTask(id);
      if (!t.ok()) return rpc::ToGrpc(t.status());
      if (!write(TaskToProto(*t))) return grpc::Status::OK;
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
      for (const TaskView& t : cp.RecentTasks()) {
        if ((wanted.empty() || wanted.count(t.id())) && !write(TaskToProto(t))) {
          return grpc::Status::OK;
        }
      }
      continue;
    }
    for (uint64_t id : ids) {
      if ((wanted.empty() || wanted.count(id)) && !send(id)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::Why(grpc::ServerContext* ctx, const v1::WhyRequest* req,
                             v1::WhyResponse* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  if (auto s = RequireId(req->id()); !s.ok()) return rpc::ToGrpc(s);
  auto w = cp.Why(req->id());
  if (!w.ok()) return rpc::ToGrpc(w.status());
  *resp = WhyToProto(*w);
  return grpc::Status::OK;
}

grpc::Status ApiService::ListNodes(grpc::ServerContext* ctx, const v1::ListNodesRequest*,
                                   v1::ListNodesResponse* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  for (const NodeView& n : cp.ListNodes()) *resp->add_nodes() = NodeToProto(n);
  resp->set_eviction_hold(cp.EvictionHold());
  return grpc::Status::OK;
}

grpc::Status ApiService::Cordon(grpc::ServerContext* ctx, const v1::CordonRequest* req,
                                v1::NodeResponse* resp) {
  if (req->node().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "node: must be set"};
  auto entered = EnterAsAdmin(
      ctx, std::string(req->cordon() ? "cordon" : "uncordon") + " node " + req->node());
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  auto n = cp.Cordon(req->node(), req->cordon());
  if (!n.ok()) return rpc::ToGrpc(n.status());
  *resp->mutable_node() = NodeToProto(*n);
  return grpc::Status::OK;
}

grpc::Status ApiService::Drain(grpc::ServerContext* ctx, const v1::DrainRequest* req,
                               v1::NodeResponse* resp) {
  if (req->node().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "node: must be set"};
  auto entered = EnterAsAdmin(ctx, "drain node " + req->node());
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  auto n = cp.Drain(req->node(), req->evict());
  if (!n.ok()) return rpc::ToGrpc(n.status());
  *resp->mutable_node() = NodeToProto(*n);
  return grpc::Status::OK;
}

grpc::Status ApiService::RemoveNode(grpc::ServerContext* ctx, const v1::RemoveNodeRequest* req,
                                    v1::RemoveNodeResponse* resp) {
  if (req->node().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "node: must be set"};
  auto entered = EnterAsAdmin(ctx, "remove node " + req->node());
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  auto requeued = entered->cp->RemoveNode(req->node(), req->force());
  if (!requeued.ok()) return rpc::ToGrpc(requeued.status());
  resp->set_node(req->node());
  for (TaskId id : *requeued) resp->add_requeued(id.value());
  return grpc::Status::OK;
}

grpc::Status ApiService::ReloadConfig(grpc::ServerContext* ctx, const v1::ReloadConfigRequest*,
                                      v1::ReloadConfigResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "reload the server's configuration");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  auto r = entered->cp->ReloadConfig();
  if (!r.ok()) return rpc::ToGrpc(r.status());
  resp->set_file(r->file);
  for (const std::string& k : r->applied) resp->add_applied(k);
  for (const std::string& k : r->needs_restart) resp->add_needs_restart(k);
  return grpc::Status::OK;
}

// The log lives on the agent that ran the task's latest attempt; the server reads it there.
grpc::Status ApiService::Logs(grpc::ServerContext* ctx, const v1::LogsRequest* req,
                              v1::LogsResponse* resp) {
  auto entered =
      EnterForTask(ctx, req->id(), "read the logs of task " + std::to_string(req->id()));
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  auto out =
      logs_.Read(cp, req->id(), req->offset(), req->max_bytes(), req->rank(), req->attempt());
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

namespace gpusched::server {

grpc::Status ApiService::CreateToken(grpc::ServerContext* ctx, const v1::CreateTokenRequest* req,
                                     v1::CreateTokenResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "token create");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  if (!req->agent_node().empty() && (!req->user().empty() || !req->team().empty() || req->admin())) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "agent_node: an agent token (--agent " + req->agent_node() +
                ") names no user, team or admin"};
  }
  auto minted = req->agent_node().empty()
                    ? entered->cp->CreateToken(req->user(), req->team(), req->admin())
                    : entered->cp->CreateAgentToken(req->agent_node());
  if (!minted.ok()) return rpc::ToGrpc(minted.status());
  TokenInfoToProto(minted->record, resp->mutable_info());
  resp->set_token(minted->token);
  return grpc::Status::OK;
}

grpc::Status ApiService::ListTokens(grpc::ServerContext* ctx, const v1::ListTokensRequest*,
                                    v1::ListTokensResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "token ls");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  for (const store::TokenRecord& r : entered->cp->ListTokens()) {
    TokenInfoToProto(r, resp->add_tokens());
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::RevokeToken(grpc::ServerContext* ctx, const v1::RevokeTokenRequest* req,
                                     v1::RevokeTokenResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "token revoke");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  if (req->id().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "id: must be a token id"};
  auto r = entered->cp->RevokeToken(req->id());
  if (!r.ok()) return rpc::ToGrpc(r.status());
  TokenInfoToProto(*r, resp->mutable_info());
  return grpc::Status::OK;
}

// ---------------------------------------------------------------- quotas and accounting

// Setting a quota is for admins; every authenticated caller may read quotas and accounting
// (as Slurm's sshare and sacct are readable by users).
grpc::Status ApiService::SetQuota(grpc::ServerContext* ctx, const v1::SetQuotaRequest* req,
                                  v1::SetQuotaResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "quota set");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  core::TeamQuota q;
  q.team = req->quota().team();
  // A team a token can name (token create --team): "x/y" was accepted, then no user could
  // ever be of that team.
  if (Status name = CheckPrincipalName(q.team, "team"); !name.ok()) return rpc::ToGrpc(name);
  q.guaranteed_gpus = req->quota().guaranteed_gpus();
  q.guaranteed_gpu_mem_mib = req->quota().guaranteed_gpu_mem_mib();
  q.borrow_gpus = req->quota().borrow_gpus();
  q.max_priority = req->quota().max_priority();
  auto out = cp.SetQuota(q, req->keep_guarantee());
  if (!out.ok()) return rpc::ToGrpc(out.status());
  *resp->mutable_quota() = QuotaToProto(*out);
  return grpc::Status::OK;
}

grpc::Status ApiService::RemoveQuota(grpc::ServerContext* ctx, const v1::RemoveQuotaRequest* req,
                                     v1::RemoveQuotaResponse*) {
  auto entered = EnterAsAdmin(ctx, "quota rm");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  return rpc::ToGrpc(entered->cp->RemoveQuota(req->team()));
}

grpc::Status ApiService::ListQuotas(grpc::ServerContext* ctx, const v1::ListQuotasRequest*,
                                    v1::ListQuotasResponse* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  *resp = QuotasToProto(entered->cp->ListQuotas());
  return grpc::Status::OK;
}

// What the GPU-memory table learned (issue 36): a profile's estimate is every user's, so
// listing and forgetting entries is for admins.
grpc::Status ApiService::ListLearnedProfiles(grpc::ServerContext* ctx,
                                             const v1::ListLearnedProfilesRequest*,
                                             v1::ListLearnedProfilesResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "profile ls");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  for (const LearnedProfileView& p : entered->cp->ListLearnedProfiles()) {
    *resp->add_profiles() = LearnedProfileToProto(p);
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::RemoveLearnedProfile(grpc::ServerContext* ctx,
                                              const v1::RemoveLearnedProfileRequest* req,
                                              v1::RemoveLearnedProfileResponse* resp) {
  auto entered = EnterAsAdmin(ctx, "profile rm");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  auto removed = entered->cp->RemoveLearnedProfile(req->key());
  if (!removed.ok()) return rpc::ToGrpc(removed.status());
  *resp->mutable_removed() = LearnedProfileToProto(*removed);
  return grpc::Status::OK;
}

// `gpusched admin backup` (issue 39): the store snapshots into a private file of the data
// directory (0700, the server's own), streamed in 1 MiB chunks, then removed.
grpc::Status ApiService::Backup(grpc::ServerContext* ctx, const v1::BackupRequest*,
                                grpc::ServerWriter<v1::BackupChunk>* writer) {
  auto entered = EnterAsAdmin(ctx, "admin backup");
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  const std::string& dir = entered->cp->config().data_dir;
  if (dir.empty()) {
    return rpc::ToGrpc(FailedPrecondition(
        "the server keeps its state in memory (no --data-dir): there is nothing to back up"));
  }
  static std::atomic<uint64_t> serial{0};
  const std::string path = dir + "/backup-" + std::to_string(getpid()) + "-" +
                           std::to_string(++serial) + ".db";
  if (Status s = entered->cp->Backup(path); !s.ok()) return rpc::ToGrpc(s);
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  const auto total = std::filesystem::file_size(path, ec);
  std::vector<char> buf(1 << 20);
  v1::BackupChunk chunk;
  chunk.set_total_bytes(ec ? 0 : static_cast<int64_t>(total));
  bool sent = true;
  while (sent && in.read(buf.data(), static_cast<std::streamsize>(buf.size())).gcount() > 0) {
    chunk.set_data(buf.data(), static_cast<size_t>(in.gcount()));
    sent = writer->Write(chunk);
    chunk.clear_total_bytes();
  }
  const bool read_all = in.eof();
  in.close();
  std::filesystem::remove(path, ec);
  if (!sent) return grpc::Status(grpc::StatusCode::CANCELLED, "backup: the client went away");
  if (!read_all) return rpc::ToGrpc(Unavailable("backup: reading the snapshot " + path + " failed"));
  return grpc::Status::OK;
}

// GPU-hours and GPU-memory-GiB-hours per (team, user) and per team over the window, from the
// durable task records (server/accounting.h).
grpc::Status ApiService::GetAccounting(grpc::ServerContext* ctx, const v1::AccountingRequest* req,
                                       v1::AccountingResponse* resp) {
  auto entered = Enter(ctx);
  if (!entered.ok()) return rpc::ToGrpc(entered.status());
  ControlPlane& cp = *entered->cp;
  if (req->since_ms() >= req->until_ms()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "since: must be before until (" + std::to_string(req->since_ms()) +
                " >= " + std::to_string(req->until_ms()) + " ms)"};
  }
  GpuTotals totals = cp.GpuTotalMib();
  AccountingQuery q;
  q.now_ms = cp.clock().NowMs();
  q.since_ms = req->since_ms();
  q.until_ms = req->until_ms();
  q.step_ms = req->until_ms() - req->since_ms();  // one step: the totals only
  q.user = req->user();
  q.team = req->team();
  using By = AccountingQuery::By;
  std::vector<By> groupings = {By::kTeamUser, By::kTeam};
  if (req->by_failure()) groupings.push_back(By::kFailure);  // issue 41
  std::vector<Accounting> accts;  // issue 38: every grouping from one pass over the tasks
  std::vector<Accounting*> into;
  accts.reserve(groupings.size());
  for (By by : groupings) {
    q.by = by;
    into.push_back(&accts.emplace_back(q, totals));
  }
  if (Status s = CollectAccountingInto(cp, into, q); !s.ok()) return rpc::ToGrpc(s);
  for (size_t i = 0; i < groupings.size(); ++i) {
    const By by = groupings[i];
    for (const AccountingGroup& g : accts[i].Groups()) {
      v1::AccountingRow* row = by == By::kTeam      ? resp->add_teams()
                               : by == By::kFailure ? resp->add_failures()
                                                    : resp->add_users();
      if (by == By::kFailure) row->set_failure(g.name);
      row->set_team(g.team);
      row->set_user(g.user);
      row->set_gpu_hours(g.gpu_hours);
      row->set_gpu_mem_gib_hours(g.gpu_mem_gib_hours);
      row->set_tasks(g.tasks);
    }
  }
  resp->set_since_ms(q.since_ms);
  resp->set_until_ms(q.until_ms);
  return grpc::Status::OK;
}

}  // namespace gpusched::server
