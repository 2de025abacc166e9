// ControlPlane: agent events (register with two-way reconciliation, heartbeats, task status,
// disconnect).

#include <algorithm>
#include <iostream>
#include <optional>
#include <variant>

#include "server/control_plane.h"

#include "base/cluster_id.h"
#include "base/log.h"

namespace gpusched::server {
namespace {

// Whether `t` is placed, but on other nodes than `node` (none of a gang's ranks is there).
// Unknown or unplaced tasks are left to the scheduler, which treats a report of them as
// stale.
bool PlacedElsewhere(const core::Task* t, const std::string& node) {
  if (t == nullptr || !t->placement.has_value() || t->placement->node == node) return false;
  for (const core::Placement& g : t->gang_placements) {
    if (g.node == node) return false;
  }
  return true;
}

}  // namespace

void ControlPlane::UpdateReachable(const std::string& node) {
  (void)sched_->SetNodeReachable(node, agents_.Reachable(node));
}

Status ControlPlane::AdmitAgent(const AgentRegistration& reg) {
  std::lock_guard<std::mutex> lock(mu_);
  return AdmitAgentLocked(reg);
}

Status ControlPlane::AdmitAgentLocked(const AgentRegistration& reg) const {
  const std::string& name = reg.spec.name;
  const std::optional<std::string> peer = agents_.OtherInstancePeer(name, reg.instance);
  const auto index = sched_->cluster().Find(name);
  if (!peer || !index) return Status::Ok();
  const core::NodeState& n = sched_->cluster().node(*index);
  const DurationMs silent = sched_->NowMs() - n.last_heartbeat_ms;
  if (!n.available || silent > sched_->config().node_timeout_ms) return Status::Ok();
  return AlreadyExists("node " + name + " is alive: another agent serves it (address " +
                       n.address + ", connected from " + *peer +
                       ", heard from " + FormatDurationMs(silent) +
                       " ago); this agent is refused until that node falls silent for " +
                       FormatDurationMs(sched_->config().node_timeout_ms));
}

Status ControlPlane::AgentRegistered(const AgentRegistration& reg,
                                     std::shared_ptr<AgentChannel> channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    GS_RETURN_IF_ERROR(AgentRegisteredLocked(reg, std::move(channel)));
  }
  Kick();
  return Status::Ok();
}

Status ControlPlane::AgentRegisteredLocked(const AgentRegistration& reg,
                                           std::shared_ptr<AgentChannel> channel) {
  const core::NodeSpec& spec = reg.spec;
  GS_RETURN_IF_ERROR(sched_->RegisterNode(spec));
  // Close never waits (the old connection's write may wait for a hung peer): its call is
  // cancelled, and the link's queue ends it.
  if (std::shared_ptr<AgentChannel> old =
          agents_.Register(spec.name, reg.instance, std::move(channel))) {
    old->Close();
  }
  UpdateReachable(spec.name);
  Reconcile(spec.name, reg);
  QueueNode(spec.name);
  StageChanges();
  return Status::Ok();
}

void ControlPlane::PostRegistration(PostedRegistration r) {
  bool wake = false;
  const std::string refused = inbox_.PostRegistration(std::move(r), &wake);
  if (!refused.empty()) {  // not posted: `r` is as it was
    r.done(Unavailable("the server is " + refused + "; the agent was not registered: connect "
                       "again"));
    return;
  }
  if (wake) Kick();
}

void ControlPlane::RegisterPostedLocked(PostedRegistration& r) {
  Status s = AdmitAgentLocked(r.reg);
  if (s.ok()) {
    r.admitted();
    s = AgentRegisteredLocked(r.reg, r.channel);
  }
  r.done(s);
}

// Two-way reconciliation (DESIGN.md "State"): first the exits the agent kept in its journal
// (each applied once: a repeated or stale one fails the attempt check), then what it runs.
// Issue 39: an agent whose files belong to another cluster (another store: task ids mean
// other tasks there) is reconciled as if it ran nothing and kept no exit; it stops that
// cluster's tasks itself once it has this one's id (Registered.cluster_id).
void ControlPlane::Reconcile(const std::string& node, const AgentRegistration& reg) {
  const std::shared_ptr<AgentChannel> channel = agents_.Channel(node);
  std::set<std::pair<uint64_t, int64_t>> running;
  core::NodeHeartbeat hb{node, {}, {}, {}};
  if (!FromAnotherCluster(node, reg)) {
    for (const TaskReport& st : reg.finished) ApplyStatus(node, st, channel);
    for (const auto& [id, attempt] : reg.running) running.insert({id.value(), attempt});
    hb.running = reg.running;
  }
  for (TaskId id : sched_->TasksOnNode(node)) {
    const core::Task& t = *sched_->GetTask(id);
    const std::pair<uint64_t, int64_t> key{id.value(), t.attempts};
    if (running.count(key) > 0) {
      // Running although its start report was lost (or adopted by a restarted agent).
      if (t.state == core::TaskState::kAssigned) (void)sched_->TaskStarted(id, t.attempts);
      continue;
    }
    if (pipeline_.AssignHeld(key.first, key.second, node)) continue;  // not sent yet
    (void)sched_->AssignmentLost(
        id, t.attempts,
        "requeued: the agent of node " + node + " does not run attempt " +
            std::to_string(t.attempts) +
            " (the assignment was lost with a connection or a server restart; not a failure)");
  }
  // What the agent runs that is not ours there is killed (core's heartbeat reconciliation).
  Status s = sched_->HandleNodeHeartbeat(hb);
  if (!s.ok()) logging::Warn("server", "register failed: " + s.ToString(), logging::NodeF(node));
}

bool ControlPlane::FromAnotherCluster(const std::string& node,
                                      const AgentRegistration& reg) const {
  if (reg.cluster_id.empty() || reg.cluster_id == ClusterId()) return false;
  const bool valid = ValidateClusterId(reg.cluster_id, "RegisterNode.cluster_id").ok();
  logging::Warn("server",
                "the agent of node " + node + " comes from cluster " +
                    (valid ? reg.cluster_id : std::string("(not a valid id)")) +
                    ", not this one (" + ClusterId() + "): its " +
                    std::to_string(reg.running.size()) + " running tasks and " +
                    std::to_string(reg.finished.size()) +
                    " kept exits are that cluster's, ignored here; it stops them itself",
                logging::NodeF(node));
  return true;
}

// When a reported exit happened, on this server's clock: the node says how long before it
// wrote the report (a re-report after a restart or reconnect says how long ago); 0 = now.
TimeMs ControlPlane::EndedAt(const TaskReport& st) const {
  return st.ended_ago_ms > 0 ? sched_->NowMs() - st.ended_ago_ms : 0;
}

void ControlPlane::ApplyStatus(const std::string& node, const TaskReport& st,
                               const std::shared_ptr<AgentChannel>& channel) {
  const TaskId id = st.id;
  const core::Task* t = sched_->GetTask(id);
  // A node reports its own tasks only (with TLS, the node its certificate names): a report
  // of a task placed on another node changes nothing. It is acknowledged like a stale one.
  const bool elsewhere = PlacedElsewhere(t, node);
  if (elsewhere) {
    logging::Warn("server", "ignored a report of a task that runs on " + t->placement->node,
                  logging::TaskF(id.value(), node));
  }
  if (st.kind == TaskReport::Kind::kStarted) {
    if (!elsewhere) (void)sched_->TaskStarted(id, st.attempt);  // stale: changes nothing
    return;
  }
  // Issue 36: the memory table, which every task of the profile uses, learns only from
  // what the agent measured itself; a value the task could write teaches its own retry.
  const bool learn = st.peak_source == TaskReport::PeakSource::kAgentMeasured ||
                     config_.learn_task_written_peaks;
  // A gang's rank is the one on the reporting node; the task ends when every rank has.
  // A late exit of a task whose node was given up (issue 37) counts from the node it last ran on.
  const auto last = last_placement_.find(id);
  const bool unplaced_elsewhere = t != nullptr && !t->placement &&
                                  (last == last_placement_.end() || last->second.node != node);
  Status s = elsewhere || unplaced_elsewhere ? Status::Ok()
                       : sched_->RankFinished(id, st.attempt, node, st.exit_code,
                                              st.peak_gpu_mem_mib, st.reason,
                                              {st.gpu_mem_exceeded, st.permanent,
                                               EndedAt(st), learn, st.out_of_memory});
  if (!elsewhere && s.ok() && learn && (st.peak_gpu_mem_mib > 0 || st.gpu_mem_exceeded) &&
      t->spec.profile) {
    pipeline_.pending().peaks.insert(*t->spec.profile);  // the aggregate the table just updated
  }
  if (!s.ok() && s.code() != StatusCode::kFailedPrecondition && s.code() != StatusCode::kNotFound) {
    logging::Warn("server", "exit not applied: " + s.ToString(), logging::TaskF(id.value(), node));
  }
  // Acknowledged once the record it changed is durable, so the agent keeps it in its journal
  // until then. A repeated or stale report changed nothing and is acknowledged as well.
  StageChanges();
  pipeline_.HoldAck(channel, id.value(), st.attempt);
}

void ControlPlane::AgentMessage(const std::string& node, AgentReport m,
                                const std::shared_ptr<AgentChannel>& channel) {
  bool kick = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kick = ApplyPostedLocked();
    kick = AgentMessageLocked(node, m, channel) || kick;
  }
  if (kick) Kick();
}

void ControlPlane::PostAgentMessage(const std::string& node, AgentReport m,
                                    const std::shared_ptr<AgentChannel>& channel) {
  bool wake = false;
  const bool urgent = Urgent(m);
  if (inbox_.PostMessage({node, std::move(m), channel}, &wake, urgent) && wake) Kick();
}

// Issue 43: what the loop must see at once: task status (capacity freed, a record and its
// ack to commit), registration, and a heartbeat that reports a GPU fault (its tasks are
// stopped at once). A routine heartbeat, node or task, waits for the next round (at most
// loop_tick): with 10,000 agents one round takes hundreds of heartbeats instead of waking
// the loop for each (bench scale: CPU per heartbeat).
bool ControlPlane::Urgent(const AgentReport& m) {
  if (std::holds_alternative<TaskBeats>(m)) return false;
  const core::NodeHeartbeat* hb = std::get_if<core::NodeHeartbeat>(&m);
  if (hb == nullptr) return true;
  return std::any_of(hb->gpu_health.begin(), hb->gpu_health.end(),
                     [](const core::NodeHeartbeat::GpuHealth& g) { return !g.healthy; });
}

void ControlPlane::PostSubmission(core::TaskSpec spec, SubmitDone done) {
  std::vector<core::TaskSpec> one;
  one.push_back(std::move(spec));
  PostSubmissions(std::move(one), "", [done = std::move(done)](StatusOr<std::vector<TaskId>> ids) {
    if (!ids.ok()) return done(ids.status());
    done(ids->front());
  });
}

void ControlPlane::PostSubmissions(std::vector<core::TaskSpec> specs, std::string idempotency_key,
                                   SubmitManyDone done) {
  if (Status health = store_->Health(); !health.ok()) {  // issue 39: the store file is gone
    done(std::move(health));
    return;
  }
  if (Status key = SplitSubmissions::ValidKey(idempotency_key); !key.ok()) {
    done(std::move(key));
    return;
  }
  bool first = false;
  PostedSubmission p{std::move(specs), std::move(idempotency_key), std::nullopt, std::move(done)};
  const std::string refused = inbox_.PostSubmission(std::move(p), &first);
  if (!refused.empty()) {  // not posted: `p` is as it was
    p.done(Unavailable("the server is " + refused + "; nothing was queued: submit again"));
    return;
  }
  if (first) Kick();
}

std::vector<PostedSubmission> ControlPlane::TakeKeyedSubmissions() {
  std::vector<PostedSubmission> keyed = inbox_.TakeKeyed();
  std::vector<PostedSubmission> read;
  read.reserve(keyed.size());
  for (PostedSubmission& p : keyed) {
    // A key committed after this read is in recent_keys_ when the round admits it.
    // Issue 38: a split submission stored in part is answered at admission, where mu_ says
    // whether its other parts are still on their way.
    StatusOr<std::optional<uint64_t>> stored =
        SplitSubmissions::ReadStored(*store_, p.key, p.specs.size(), &p.partly);
    if (!stored.ok()) {
      p.done(Unavailable("the idempotency key could not be read from the store (" +
                         stored.status().message() + "); nothing was queued: submit again"));
      continue;
    }
    p.stored = *stored;
    read.push_back(std::move(p));
  }
  return read;
}

bool ControlPlane::ApplyPostedLocked() {
  auto [posted, registrations, submissions] = inbox_.Take();
  bool kick = false;
  for (PostedMessage& p : posted) {
    // A closed channel is no longer the node's agent: the message would be dropped below
    // (and a channel that ended is in no registry any more: its end changes nothing).
    if (std::shared_ptr<AgentChannel> channel = p.channel.lock()) {
      kick = (p.ended ? DisconnectedLocked(p.node, channel.get())
                      : AgentMessageLocked(p.node, p.message, channel)) ||
             kick;
    }
  }
  // Issue 43: every agent that registered since the last round, in one round (one pass
  // follows for all of them); after the messages, so that a replaced stream's last words
  // (posted before its agent came back) count first.
  for (PostedRegistration& r : registrations) RegisterPostedLocked(r);
  // After the agents' messages (an exit they report frees GPUs first), in the order posted.
  for (PostedSubmission& p : submissions) AdmitPostedLocked(p);
  return kick || !registrations.empty() || !submissions.empty();
}

void ControlPlane::AdmitPostedLocked(PostedSubmission& p) {
  const size_t n = p.specs.size();
  if (waiters_.waiting() >= kMaxPosted) {  // commits lag: bounded, never queued on
    waiters_.Decide(std::move(p.done),
                    Unavailable("the server is busy: " + std::to_string(kMaxPosted) +
                                " submissions wait for their commit; nothing was "
                                "queued: submit again"));
    return;
  }
  if (p.stored) {  // a retry of a stored submission: its tasks
    waiters_.Decide(std::move(p.done), SubmissionWaiters::ConsecutiveIds(TaskId(*p.stored), n));
    return;
  }
  if (std::optional<TaskId> first = p.key.empty() ? std::nullopt : recent_keys_.Find(p.key)) {
    // A retry racing the first's commit (or, split, a later part's): answered by it.
    if (sched_->IsHeld(*first) || splits_.Find(*first) != nullptr) {
      waiters_.Await(*first, std::move(p.done), n);
    } else if (p.partly) {
      waiters_.Decide(std::move(p.done), *p.partly);
    } else {
      waiters_.Decide(std::move(p.done), SubmissionWaiters::ConsecutiveIds(*first, n));
    }
    return;
  }
  if (p.partly) {  // stored in part by an earlier leader: the rest was withdrawn
    waiters_.Decide(std::move(p.done), *p.partly);
    return;
  }
  std::vector<TaskId> ids;
  ids.reserve(n);
  for (core::TaskSpec& spec : p.specs) {
    StatusOr<TaskId> id = sched_->Submit(std::move(spec), /*hold=*/true);
    if (!id.ok()) {  // none is queued unless all are
      for (TaskId admitted : ids) Forget(admitted);
      waiters_.Decide(std::move(p.done), id.status());
      return;
    }
    ids.push_back(*id);
  }
  metrics_.AddSubmitted(static_cast<int64_t>(n));
  StageSubmissionLocked(ids, p.key);
  waiters_.Await(ids.front(), std::move(p.done), n);
}

bool ControlPlane::AgentMessageLocked(const std::string& node, AgentReport& m,
                                      const std::shared_ptr<AgentChannel>& channel) {
  bool kick = false;
  if (!agents_.IsCurrent(node, channel.get())) return false;  // replaced
  if (core::NodeHeartbeat* hb = std::get_if<core::NodeHeartbeat>(&m)) {
    hb->node = node;
    Status s = sched_->HandleNodeHeartbeat(*hb);
    if (!s.ok()) {
      logging::Warn("server", "heartbeat not applied: " + s.ToString(), logging::NodeF(node));
    }
  } else if (TaskBeats* beats = std::get_if<TaskBeats>(&m)) {
    TaskBeatsLocked(node, *beats);
  } else if (const TaskReport* st = std::get_if<TaskReport>(&m)) {
    ApplyStatus(node, *st, channel);
    kick = true;  // capacity freed, or a record (and its ack) to commit
  }
  StageChanges();
  kick = kick || pipeline_.HasWork();
  return kick;
}

void ControlPlane::TaskBeatsLocked(const std::string& node, TaskBeats& beats) {
  for (TaskBeat& b : beats.tasks) {
    if (PlacedElsewhere(sched_->GetTask(b.id), node)) continue;  // not its own
    // Stale attempts are ignored.
    (void)sched_->TaskHeartbeat(b.id, b.attempt, b.usage, std::move(b.executor));
  }
}

void ControlPlane::AgentDisconnected(const std::string& node, const AgentChannel* channel) {
  bool kick = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kick = ApplyPostedLocked();  // what the agent said before it went
    kick = DisconnectedLocked(node, channel) || kick;
  }
  if (kick) Kick();
}

void ControlPlane::PostAgentDisconnected(const std::string& node,
                                         const std::shared_ptr<AgentChannel>& channel) {
  bool wake = false;
  if (inbox_.PostMessage({node, {}, channel, /*ended=*/true}, &wake) && wake) Kick();
}

bool ControlPlane::DisconnectedLocked(const std::string& node, const AgentChannel* channel) {
  if (!agents_.Disconnected(node, channel)) return false;  // replaced already
  UpdateReachable(node);
  StageChanges();
  return pipeline_.HasWork();
}

void ControlPlane::DisconnectAgents() {
  std::map<std::string, std::shared_ptr<AgentChannel>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections = agents_.TakeAll();
  }
  for (auto& [node, channel] : connections) channel->Close();  // never blocks
}

}  // namespace gpusched::server
