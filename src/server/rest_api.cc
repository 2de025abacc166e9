#include "server/rest_api.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "core/task_validation.h"
#include "rpc/json.h"
#include "server/access.h"
#include "server/accounting.h"
#include "server/api_convert.h"
#include "server/dashboard_assets.h"
#include "server/log_reader.h"
#include "server/rest_params.h"
#include "server/task_filter.h"

namespace gpusched::server {
namespace {

using Json = nlohmann::json;
using httplib::Request;
using httplib::Response;

constexpr int64_t kStreamWaitMs = 500;   // a stream notices a stopping server this fast
constexpr int64_t kTickMs = 2000;        // "tick" events: node health and memory move too
constexpr int64_t kLogPollMs = 300;
constexpr size_t kMaxIdsPerEvent = 1000;
constexpr size_t kMaxScanPages = 50;     // a filtered listing reads at most this many pages

// ---------------------------------------------------------------- access, errors, replies

enum class Access { kRead, kWrite };

// The one place every request is let in: the caller named by the bearer token in the
// Authorization header (Unauthenticated: 401), or with authentication off an admin named by
// the owner of the request's loopback connection (issue 35, peer_identity.h; never by a
// header), else the default user (ControlPlane::Authenticate). What each caller may do is
// access.h's. The token travels in a header only, never in a URL (URLs end up in logs).
// Another site's page cannot write: the door (http_door.h) refuses a write whose Origin is
// not the server's own before anything else, and a body must be JSON (CheckJsonBody).
StatusOr<Caller> Authorize(ControlPlane& cp, const PeerIdentity* peers, const Request& req) {
  std::string local_user;
  if (!cp.auth_enabled() && peers != nullptr) {
    local_user = peers->UserOf({req.remote_addr, static_cast<uint16_t>(req.remote_port)},
                               {req.local_addr, static_cast<uint16_t>(req.local_port)});
  }
  return cp.Authenticate(req.get_header_value("Authorization"), local_user);
}

// A write's content: a body (or a Content-Type) must be JSON; no body at all is fine
// (`curl -X POST .../cancel`). Checked after the caller and the object (issue 41), so that
// what a caller may not touch is answered 403 or 404 whatever the request carries.
Status CheckJsonBody(const Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if ((req.body.empty() && type.empty()) || type.rfind("application/json", 0) == 0) {
    return Status::Ok();
  }
  return InvalidArgument("Content-Type: must be application/json with a body, got \"" + type +
                         "\"");
}

int HttpStatus(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 422;  // no node could ever fit it
    case StatusCode::kUnavailable:
    case StatusCode::kNotStored: return 503;          // safe to retry
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kInternal:
    case StatusCode::kDataLoss: break;
  }
  return 500;
}

// The parameter or field an error message starts with ("limit: ...", "\"x\": ..." or, for an
// object named by its id, "task 7: ..."), or "".
std::string FieldOf(const std::string& message) {
  static const std::regex field(R"re(^"?([A-Za-z_][A-Za-z0-9_.\[\]-]*)"?(?: [0-9]+)?: )re");
  std::smatch m;
  return std::regex_search(message, m, field) ? m[1].str() : "";
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void SendJson(Response& res, int status, const Json& j) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(Dump(j) + "\n", "application/json");
}

void SendError(Response& res, const Status& s) {
  // RFC 6750: a 401 names the scheme it wants.
  if (s.code() == StatusCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"gpusched\"");
  }
  SendJson(res, HttpStatus(s.code()),
           {{"error",
             {{"status", HttpStatus(s.code())},
              {"code", StatusCodeName(s.code())},
              {"message", s.message()},
              {"field", FieldOf(s.message())}}}});
}

// The task exists (NotFound otherwise) and the caller may read its logs (its owner or an admin).
Status MayReadLogs(ControlPlane& cp, const Caller& caller, uint64_t id) {
  GS_ASSIGN_OR_RETURN(TaskView t, cp.GetTask(id));
  return RequireOwnerOrAdmin(caller, TaskToProto(t),
                             "read the logs of task " + std::to_string(id));
}

// ---------------------------------------------------------------- the API

class RestApi : public std::enable_shared_from_this<RestApi> {
 public:
  RestApi(ControlPlane& cp, const PeerIdentity* peers) : cp_(cp), peers_(peers) {}
  void Register(httplib::Server& http);

 private:
  using Handler = StatusOr<Json> (RestApi::*)(const Request&, const Caller&);
  // What a write touches, checked before its content: the object exists (404) and the caller
  // may change it (403).
  using Precheck = Status (RestApi::*)(const Request&, const Caller&);
  // A JSON route: the caller (401), for a write `precheck` then the content (400), the
  // handler, the reply (`ok` on success). Never throws.
  httplib::Server::Handler Route(Access access, Handler h, int ok = 200,
                                 Precheck precheck = nullptr);

  Status MayCancel(const Request& req, const Caller& caller);
  Status MayRemoveNode(const Request& req, const Caller& caller);
  StatusOr<Json> ListTasks(const Request& req, const Caller& caller);
  StatusOr<Json> GetTask(const Request& req, const Caller& caller);
  StatusOr<Json> SubmitTask(const Request& req, const Caller& caller);
  StatusOr<Json> CancelTask(const Request& req, const Caller& caller);
  StatusOr<Json> ReadLogs(const Request& req, const Caller& caller);
  StatusOr<Json> Nodes(const Request& req, const Caller& caller);
  StatusOr<Json> RemoveNode(const Request& req, const Caller& caller);
  StatusOr<Json> Queues(const Request& req, const Caller& caller);
  StatusOr<Json> GetAccounting(const Request& req, const Caller& caller);
  // A task's JSON as `caller` may read it (access.h RedactForCaller): every task this API
  // hands out goes through here.
  Json TaskFor(const Caller& caller, v1::Task t);
  void Events(const Request& req, const Caller& caller, Response& res);
  void FollowLogs(const Caller& caller, uint64_t id, int64_t offset, Response& res);
  StatusOr<StreamLimiter::Slot> TakeStream(const Caller& caller, Response& res);

  ControlPlane& cp_;
  const PeerIdentity* peers_;  // may be null
  LogReader logs_;
};

httplib::Server::Handler RestApi::Route(Access access, Handler h, int ok, Precheck precheck) {
  auto self = shared_from_this();
  return [self, access, h, ok, precheck](const Request& req, Response& res) {
    StatusOr<Caller> caller = Authorize(self->cp_, self->peers_, req);
    if (!caller.ok()) return SendError(res, caller.status());
    StatusOr<Json> out = Internal("no answer");
    try {
      Status allowed = precheck ? ((*self).*precheck)(req, *caller) : Status::Ok();
      if (allowed.ok() && access == Access::kWrite) allowed = CheckJsonBody(req);
      out = allowed.ok() ? ((*self).*h)(req, *caller) : StatusOr<Json>(allowed);
    } catch (const std::exception& e) {  // a third-party throw must not take the server down
      out = Internal(std::string("internal error: ") + e.what());
    }
    if (!out.ok()) return SendError(res, out.status());
    SendJson(res, ok, *out);
  };
}

Json RestApi::TaskFor(const Caller& caller, v1::Task t) {
  RedactForCaller(caller, cp_.config().private_data, &t);
  return rpc::TaskJson(t, cp_.clock().NowMs());
}

StatusOr<Json> RestApi::ListTasks(const Request& req, const Caller& caller) {
  GS_ASSIGN_OR_RETURN(rest::Query q, rest::CheckQuery(req.params, {"state", "user", "team",
                                                                   "name", "node", "limit",
                                                                   "after"}));
  GS_ASSIGN_OR_RETURN(std::optional<core::TaskState> state, rest::StateParam(q, "state"));
  GS_ASSIGN_OR_RETURN(int64_t limit, rest::IntParam(q, "limit", 1, 1000, 100));
  GS_ASSIGN_OR_RETURN(int64_t after, rest::IntParam(q, "after", 0, INT64_MAX, 0));
  const auto param = [&q](const char* key) { return q.count(key) ? q.at(key) : ""; };
  const TaskFilter filter{param("user"), param("team"), param("name"), param("node")};
  auto wanted = [&](const v1::Task& t) { return MatchesTaskFilter(t, filter); };
  Json tasks = Json::array();
  uint64_t cursor = static_cast<uint64_t>(after), next = 0;
  for (size_t pages = 0; pages < kMaxScanPages; ++pages) {
    GS_ASSIGN_OR_RETURN(ListPage page, cp_.ListTasks(state, cursor, size_t(limit)));
    for (const TaskView& view : page.tasks) {
      const v1::Task t = TaskToProto(view);
      cursor = t.id();
      if (!wanted(t)) continue;
      tasks.push_back(TaskFor(caller, t));
      if (int64_t(tasks.size()) == limit) break;
    }
    const bool page_left = !page.tasks.empty() && cursor != page.tasks.back().id();
    if (page_left || (page.next_after_id != 0 && int64_t(tasks.size()) == limit)) {
      next = cursor;  // more may follow
      break;
    }
    if (page.next_after_id == 0) break;
    cursor = page.next_after_id;
    next = cursor;  // kMaxScanPages reached: the client continues from here
  }
  return Json{{"tasks", tasks}, {"next_after", next == 0 ? Json() : Json(next)}};
}

StatusOr<Json> RestApi::GetTask(const Request& req, const Caller& caller) {
  GS_RETURN_IF_ERROR(rest::CheckQuery(req.params, {}).status());
  GS_ASSIGN_OR_RETURN(uint64_t id, rest::TaskIdParam(req.matches[1]));
  GS_ASSIGN_OR_RETURN(TaskView view, cp_.GetTask(id));
  const v1::Task t = TaskToProto(view, /*with_history=*/true);
  Json j = TaskFor(caller, t);
  const TaskOwner o = OwnerOf(t);
  j["user"] = o.user;
  j["team"] = o.team;
  j["st"] = t.st();
  j["mem_source"] = t.mem_source();
  j["placement"] = {{"node", t.node()},
                    {"gpus", std::vector<int>(t.gpus().begin(), t.gpus().end())},
                    {"gpu_mem_mib", std::vector<int64_t>(t.gpu_mem_mib().begin(),
                                                         t.gpu_mem_mib().end())}};
  StatusOr<core::Explanation> why = cp_.Why(id);  // NotFound once it left memory
  j["why"] = why.ok() ? rpc::WhyJson(WhyToProto(*why)) : Json();
  return j;
}

StatusOr<Json> RestApi::SubmitTask(const Request& req, const Caller& caller) {
  GS_RETURN_IF_ERROR(rest::CheckQuery(req.params, {}).status());
  const size_t max_body = static_cast<size_t>(cp_.config().http_max_body);
  if (req.body.size() > max_body) {  // a chunked body the door let in
    return InvalidArgument("body: " + std::to_string(req.body.size()) + " bytes, at most " +
                           std::to_string(max_body) + " (server key http_max_body)");
  }
  GS_ASSIGN_OR_RETURN(rest::SubmitBody body, rest::ParseSubmitBody(req.body));
  GS_RETURN_IF_ERROR(core::CheckSubmittedEnv(body.spec));  // GPUSCHED_* is the product's
  body.spec.user = caller.user;  // the server says who submits, never the body
  body.spec.team = caller.team;
  const std::string header = req.get_header_value("Idempotency-Key");
  if (!header.empty() && !body.idempotency_key.empty() && header != body.idempotency_key) {
    return InvalidArgument("idempotency_key: differs from the Idempotency-Key header");
  }
  const std::string key = header.empty() ? body.idempotency_key : header;
  if (body.array) {
    GS_ASSIGN_OR_RETURN(std::vector<TaskId> ids,
                        cp_.SubmitArray(std::move(body.spec), *body.array, key));
    Json all = Json::array();
    for (TaskId id : ids) all.push_back(id.value());
    return Json{{"id", ids.front().value()},
                {"ids", std::move(all)},
                {"url", "/api/v1/tasks/" + std::to_string(ids.front().value())}};
  }
  GS_ASSIGN_OR_RETURN(TaskId id, cp_.Submit(std::move(body.spec), key));
  return Json{{"id", id.value()}, {"url", "/api/v1/tasks/" + std::to_string(id.value())}};
}

// The task exists (404) and the caller owns it or is an admin (403).
Status RestApi::MayCancel(const Request& req, const Caller& caller) {
  GS_ASSIGN_OR_RETURN(uint64_t id, rest::TaskIdParam(req.matches[1]));
  GS_ASSIGN_OR_RETURN(TaskView owned, cp_.GetTask(id));
  return RequireOwnerOrAdmin(caller, TaskToProto(owned), "cancel task " + std::to_string(id));
}

StatusOr<Json> RestApi::CancelTask(const Request& req, const Caller& caller) {
  GS_RETURN_IF_ERROR(rest::CheckQuery(req.params, {}).status());
  GS_ASSIGN_OR_RETURN(uint64_t id, rest::TaskIdParam(req.matches[1]));
  GS_ASSIGN_OR_RETURN(TaskView t, cp_.Cancel(id));
  return TaskFor(caller, TaskToProto(t));
}

StatusOr<Json> RestApi::ReadLogs(const Request& req, const Caller& caller) {
  GS_ASSIGN_OR_RETURN(rest::Query q,
                      rest::CheckQuery(req.params, {"offset", "max_bytes", "rank", "attempt"}));
  GS_ASSIGN_OR_RETURN(uint64_t id, rest::TaskIdParam(req.matches[1]));
  GS_ASSIGN_OR_RETURN(int64_t offset, rest::IntParam(q, "offset", 0, INT64_MAX, 0));
  GS_ASSIGN_OR_RETURN(int64_t rank, rest::IntParam(q, "rank", 0, core::kMaxGangNodes - 1, 0));
  GS_ASSIGN_OR_RETURN(int64_t max, rest::IntParam(q, "max_bytes", 1, LogReader::kMaxChunk,
                                                  LogReader::kMaxChunk));
  // Issue 41: an earlier attempt's log (0 = the latest), as `gpusched logs --attempt N`.
  GS_ASSIGN_OR_RETURN(int64_t attempt, rest::IntParam(q, "attempt", 0, INT64_MAX, 0));
  GS_RETURN_IF_ERROR(MayReadLogs(cp_, caller, id));
  GS_ASSIGN_OR_RETURN(v1::LogsResponse r, logs_.Read(cp_, id, offset, max,
                                                     static_cast<int>(rank), attempt));
  return Json{{"attempt", r.attempt()},
              {"data", r.data()},
              {"next_offset", r.next_offset()},
              {"task_done", r.task_done()}};
}

StatusOr<Json> RestApi::Nodes(const Request& req, const Caller&) {
  GS_RETURN_IF_ERROR(rest::CheckQuery(req.params, {}).status());
  ClusterView view = cp_.Cluster();
  // (node, gpu) -> the tasks holding it, ascending id (view.active is).
  std::map<std::pair<std::string, int>, Json> shares;
  for (const TaskView& active : view.active) {
    const v1::Task t = TaskToProto(active);
    for (int i = 0; i < t.gpus_size(); ++i) {
      Json& list = shares[{t.node(), t.gpus(i)}];
      if (list.is_null()) list = Json::array();
      list.push_back({{"task", t.id()},
                      {"name", t.name()},
                      {"state", t.state()},
                      {"mib", i < t.gpu_mem_mib_size() ? t.gpu_mem_mib(i) : 0},
                      {"exclusive", t.mem_source() == "whole-gpu"}});
    }
  }
  Json nodes = Json::array();
  for (const NodeView& node : view.nodes) {
    const v1::Node n = NodeToProto(node);
    Json j = rpc::NodeJson(n);
    j["state"] = rpc::NodeStateName(n);
    j["last_heartbeat_ms"] = n.last_heartbeat_ms();
    for (Json& g : j["gpus"]) {
      auto it = shares.find({n.name(), g["index"].get<int>()});
      g["shares"] = it == shares.end() ? Json::array() : it->second;
      g["free_mib"] = g["total_mib"].get<int64_t>() - g["allocated_mib"].get<int64_t>();
    }
    nodes.push_back(std::move(j));
  }
  return Json{{"nodes", nodes}};
}

// Issue 39: DELETE /api/v1/nodes/NAME[?force=true], the rules of `gpusched node rm`.
Status RestApi::MayRemoveNode(const Request& req, const Caller& caller) {
  return RequireAdmin(caller, "remove node " + std::string(req.matches[1]));
}

StatusOr<Json> RestApi::RemoveNode(const Request& req, const Caller&) {
  GS_ASSIGN_OR_RETURN(rest::Query q, rest::CheckQuery(req.params, {"force"}));
  const std::string node = req.matches[1];
  bool force = false;
  if (auto f = q.find("force"); f != q.end()) {
    if (f->second != "true" && f->second != "false") {
      return InvalidArgument("force: must be true or false, got \"" + f->second + "\"");
    }
    force = f->second == "true";
  }
  GS_ASSIGN_OR_RETURN(std::vector<TaskId> requeued, cp_.RemoveNode(node, force));
  Json ids = Json::array();
  for (TaskId id : requeued) ids.push_back(id.value());
  return Json{{"node", node}, {"removed", true}, {"requeued", ids}};
}

StatusOr<Json> RestApi::Queues(const Request& req, const Caller& caller) {
  GS_ASSIGN_OR_RETURN(rest::Query q, rest::CheckQuery(req.params, {"limit"}));
  GS_ASSIGN_OR_RETURN(int64_t limit, rest::IntParam(q, "limit", 1, 10'000, 500));
  QueuesView view = cp_.Queues(size_t(limit));
  auto list = [&](const std::vector<QueuedTask>& tasks, size_t size) {
    Json a = Json::array();
    for (const QueuedTask& t : tasks) {
      Json j = TaskFor(caller, TaskToProto(t.task));
      j["position"] = a.size() + 1;
      j["why"] = t.why;
      a.push_back(std::move(j));
    }
    return Json{{"size", size}, {"tasks", a}};
  };
  return Json{{"Q", list(view.main, view.main_size)},
              {"FQ", list(view.failure, view.failure_size)}};
}

StatusOr<Json> RestApi::GetAccounting(const Request& req, const Caller&) {
  GS_ASSIGN_OR_RETURN(rest::Query q, rest::CheckQuery(req.params, {"by", "user", "team", "since",
                                                                   "until", "step"}));
  AccountingQuery aq;
  aq.now_ms = cp_.clock().NowMs();
  const std::string by = q.count("by") ? q.at("by") : "team";
  if (by != "team" && by != "user") {
    return InvalidArgument("by: \"" + by + "\" is not a grouping (team or user)");
  }
  aq.by = by == "user" ? AccountingQuery::By::kUser : AccountingQuery::By::kTeam;
  aq.user = q.count("user") ? q.at("user") : "";
  aq.team = q.count("team") ? q.at("team") : "";
  GS_ASSIGN_OR_RETURN(aq.until_ms, rest::TimeParam(q, "until", aq.now_ms, aq.now_ms));
  GS_ASSIGN_OR_RETURN(aq.since_ms,
                      rest::TimeParam(q, "since", aq.now_ms, aq.until_ms - 86'400'000));
  if (aq.since_ms >= aq.until_ms) {
    return InvalidArgument("since: must be before until (" + std::to_string(aq.since_ms) +
                           " >= " + std::to_string(aq.until_ms) + ")");
  }
  const int64_t window = aq.until_ms - aq.since_ms;
  GS_ASSIGN_OR_RETURN(aq.step_ms,
                      rest::DurationParam(q, "step", std::max<int64_t>(1000, window / 48)));
  if (window / aq.step_ms > 2000) {
    return InvalidArgument("step: " + q.at("step") + " cuts the window into more than 2000 steps");
  }
  GpuTotals totals = cp_.GpuTotalMib();
  Accounting acct(aq, std::move(totals));
  // Every task that may have run inside the window, with its history.
  GS_ASSIGN_OR_RETURN(std::vector<AccountingGroup> found, CollectAccounting(cp_, acct, aq));
  Json groups = Json::array();
  for (const AccountingGroup& g : found) {
    groups.push_back({{"name", g.name},
                      {"gpu_hours", g.gpu_hours},
                      {"gpu_mem_gib_hours", g.gpu_mem_gib_hours},
                      {"tasks", g.tasks},
                      {"gpu_hours_by_step", g.gpu_hours_by_step}});
  }
  return Json{{"by", by},         {"since_ms", aq.since_ms}, {"until_ms", aq.until_ms},
              {"step_ms", aq.step_ms}, {"steps", acct.steps()}, {"groups", groups}};
}

// ---------------------------------------------------------------- streams (server-sent events)

// Counts a stream of `caller` (stream_limit keys); 429 naming the limit when it is reached.
StatusOr<StreamLimiter::Slot> RestApi::TakeStream(const Caller& caller, Response& res) {
  StatusOr<StreamLimiter::Slot> slot = cp_.streams().Acquire(caller.user);
  if (!slot.ok()) {
    SendError(res, slot.status());
    res.status = 429;  // SendError says 422 for ResourceExhausted: "too many", not "too big"
    res.set_header("Retry-After", "5");
    return slot;
  }
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");  // a proxy must not hold events back
  return slot;
}

std::string Event(const std::string& name, const Json& data) {
  return "event: " + name + "\ndata: " + Dump(data) + "\n\n";
}

// "change" events name the tasks that changed ({"version", "ids", "all"}); "tick" events come
// when nothing changed for kTickMs, so a view of nodes (heartbeats, health) stays fresh.
void RestApi::Events(const Request& req, const Caller& caller, Response& res) {
  if (Status s = rest::CheckQuery(req.params, {}).status(); !s.ok()) return SendError(res, s);
  StatusOr<StreamLimiter::Slot> slot = TakeStream(caller, res);
  if (!slot.ok()) return;
  std::vector<uint64_t> ids;
  bool everything = false;
  auto version = std::make_shared<uint64_t>(cp_.WaitForChanges(UINT64_MAX - 1, 0, ids,
                                                               everything));
  auto quiet_ms = std::make_shared<int64_t>(0);
  auto self = shared_from_this();
  res.set_chunked_content_provider(
      "text/event-stream",
      [self, version, quiet_ms](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          const std::string hello = "retry: 2000\n\n" + Event("hello", {{"version", *version}});
          return sink.write(hello.data(), hello.size());
        }
        std::vector<uint64_t> changed;
        bool all = false;
        const uint64_t v = self->cp_.WaitForChanges(*version, kStreamWaitMs, changed, all);
        std::string out;
        if (v != *version) {
          *version = v;
          *quiet_ms = 0;
          if (changed.size() > kMaxIdsPerEvent) {
            changed.clear();
            all = true;
          }
          out = Event("change", {{"version", v}, {"ids", changed}, {"all", all}});
        } else if ((*quiet_ms += kStreamWaitMs) >= kTickMs) {
          *quiet_ms = 0;
          out = Event("tick", {{"version", v}});
        } else {
          out = ":\n\n";  // a comment: finds a closed connection
        }
        return sink.write(out.data(), out.size());
      },
      [slot = *slot](bool) {});  // the slot ends with the stream
}

// Events: "log" {"attempt", "offset", "data"} for each chunk (its id: the offset after it, so
// a reconnecting EventSource resumes there through Last-Event-ID), "attempt" {"attempt"} when
// a retry starts a new log, "end" {"attempt"} once the task is done and its log drained, and
// "failure" {"message"} when the log cannot be read.
void RestApi::FollowLogs(const Caller& caller, uint64_t id, int64_t offset, Response& res) {
  StatusOr<StreamLimiter::Slot> slot = TakeStream(caller, res);
  if (!slot.ok()) return;
  struct Cursor {
    int64_t offset = 0, attempt = -1;
  };
  auto cursor = std::make_shared<Cursor>();
  cursor->offset = offset;
  auto self = shared_from_this();
  res.set_chunked_content_provider(
      "text/event-stream",
      [self, id, cursor](size_t, httplib::DataSink& sink) {
        StatusOr<v1::LogsResponse> r = self->logs_.Read(self->cp_, id, cursor->offset, 0);
        std::string out;
        if (!r.ok()) {
          out = Event("failure", {{"message", r.status().message()}});
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        if (cursor->attempt >= 0 && r->attempt() != cursor->attempt) {
          cursor->offset = 0;  // a retry started: its log is new
          cursor->attempt = r->attempt();
          out = Event("attempt", {{"attempt", r->attempt()}});
          return sink.write(out.data(), out.size());
        }
        cursor->attempt = r->attempt();
        if (!r->data().empty()) {
          out = "id: " + std::to_string(r->next_offset()) + "\n" +
                Event("log", {{"attempt", r->attempt()}, {"offset", cursor->offset},
                              {"data", r->data()}});
          cursor->offset = r->next_offset();
          return sink.write(out.data(), out.size());
        }
        if (r->task_done()) {
          out = Event("end", {{"attempt", r->attempt()}});
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        self->cp_.clock().SleepMs(kLogPollMs);
        out = ":\n\n";
        return sink.write(out.data(), out.size());
      },
      [slot = *slot](bool) {});  // the slot ends with the stream
}

// ---------------------------------------------------------------- routes

void RestApi::Register(httplib::Server& http) {
  auto self = shared_from_this();
  http.Get("/api/v1/tasks", Route(Access::kRead, &RestApi::ListTasks));
  http.Post("/api/v1/tasks", Route(Access::kWrite, &RestApi::SubmitTask, 201));
  http.Get("/api/v1/tasks/([^/]+)", Route(Access::kRead, &RestApi::GetTask));
  http.Post("/api/v1/tasks/([^/]+)/cancel",
            Route(Access::kWrite, &RestApi::CancelTask, 200, &RestApi::MayCancel));
  http.Get("/api/v1/tasks/([^/]+)/logs", [self](const Request& req, Response& res) {
    StatusOr<Caller> caller = Authorize(self->cp_, self->peers_, req);
    if (!caller.ok()) return SendError(res, caller.status());
    const bool follow = req.has_param("follow") ||
                        req.get_header_value("Accept").find("text/event-stream") !=
                            std::string::npos;
    if (!follow) return self->Route(Access::kRead, &RestApi::ReadLogs)(req, res);
    StatusOr<rest::Query> checked = rest::CheckQuery(req.params, {"offset", "follow"});
    StatusOr<uint64_t> id = rest::TaskIdParam(req.matches[1]);
    StatusOr<int64_t> offset = checked.ok() ? rest::IntParam(*checked, "offset", 0, INT64_MAX, 0)
                                            : StatusOr<int64_t>(checked.status());
    if (offset.ok() && req.has_header("Last-Event-ID")) {  // a reconnect: resume there
      offset = rest::IntParam({{"Last-Event-ID", req.get_header_value("Last-Event-ID")}},
                              "Last-Event-ID", 0, INT64_MAX, 0);
    }
    if (checked.ok() && checked->count("follow") && checked->at("follow") != "true" &&
        checked->at("follow") != "1") {
      offset = InvalidArgument("follow: \"" + checked->at("follow") + "\" must be true or 1");
    }
    if (!id.ok()) return SendError(res, id.status());
    if (!offset.ok()) return SendError(res, offset.status());
    if (Status allowed = MayReadLogs(self->cp_, *caller, *id); !allowed.ok()) {
      return SendError(res, allowed);
    }
    self->FollowLogs(*caller, *id, *offset, res);
  });
  http.Get("/api/v1/nodes", Route(Access::kRead, &RestApi::Nodes));
  http.Delete("/api/v1/nodes/([^/]+)",
              Route(Access::kWrite, &RestApi::RemoveNode, 200, &RestApi::MayRemoveNode));
  http.Get("/api/v1/queues", Route(Access::kRead, &RestApi::Queues));
  http.Get("/api/v1/accounting", Route(Access::kRead, &RestApi::GetAccounting));
  http.Get("/api/v1/events", [self](const Request& req, Response& res) {
    StatusOr<Caller> caller = Authorize(self->cp_, self->peers_, req);
    if (!caller.ok()) return SendError(res, caller.status());
    self->Events(req, *caller, res);
  });
  http.Get("/api/v1/openapi.json", [](const Request&, Response& res) {
    const Asset* a = FindAsset("openapi.json");
    res.set_content(std::string(a->body), std::string(a->content_type));
  });
  auto unknown = [](const Request& req, Response& res) {
    SendError(res, NotFound("path: no " + req.method + " " + req.path +
                            " in this API (see /api/v1/openapi.json)"));
  };
  http.Get("/api/.*", unknown);
  http.Post("/api/.*", unknown);
  http.Put("/api/.*", unknown);
  http.Delete("/api/.*", unknown);
  http.Patch("/api/.*", unknown);
}

}  // namespace

void RegisterRestApi(httplib::Server& http, ControlPlane& cp, const PeerIdentity* peers) {
  std::make_shared<RestApi>(cp, peers)->Register(http);
}

}  // namespace gpusched::server
