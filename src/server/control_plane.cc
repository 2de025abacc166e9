#include "server/control_plane.h"

#include <iostream>

namespace gpusched::server {
namespace {

// Change-log entries kept for Watch; a watcher further behind gets every task again.
constexpr size_t kMaxChangeLog = 200'000;

}  // namespace

StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(
    const ServerConfig& config, Clock& clock, std::unique_ptr<store::StateStore> store) {
  GS_RETURN_IF_ERROR(config.Validate());
  GS_ASSIGN_OR_RETURN(std::unique_ptr<core::Scheduler> sched,
                      core::Scheduler::Create(config.scheduler, clock));
  std::unique_ptr<ControlPlane> cp(
      new ControlPlane(config, clock, std::move(store), std::move(sched)));
  GS_RETURN_IF_ERROR(cp->Restore());
  return cp;
}

ControlPlane::ControlPlane(const ServerConfig& config, Clock& clock,
                           std::unique_ptr<store::StateStore> store,
                           std::unique_ptr<core::Scheduler> scheduler)
    : config_(config), clock_(clock), store_(std::move(store)), sched_(std::move(scheduler)) {}

ControlPlane::~ControlPlane() { StopLoop(); }

Status ControlPlane::Restore() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, store_->LoadNodes());
  for (const store::NodeRecord& n : nodes) {
    GS_RETURN_IF_ERROR(sched_->RegisterNode(n.spec));
    // Unreachable until the agent reconnects: no new work goes there meanwhile.
    GS_RETURN_IF_ERROR(sched_->SetNodeReachable(n.spec.name, false));
    if (n.cordoned) GS_RETURN_IF_ERROR(sched_->Cordon(n.spec.name, true));
  }
  GS_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks, store_->LoadTasks());
  for (const store::TaskRecord& r : tasks) {
    GS_RETURN_IF_ERROR(sched_->Restore(r.task));
    if (r.last_placement) last_placement_[r.task.id] = *r.last_placement;
  }
  GS_ASSIGN_OR_RETURN(std::vector<store::MemoryObservation> peaks,
                      store_->LoadMemoryObservations());
  for (const store::MemoryObservation& o : peaks) {
    sched_->memory_table().Observe(o.profile, o.peak_mib);
  }
  if (!tasks.empty()) {
    std::cerr << "gpusched server: restored " << tasks.size() << " tasks, " << nodes.size()
              << " nodes, " << peaks.size() << " memory observations\n";
  }
  return Flush();  // requeued restores are written back
}

// ---------------------------------------------------------------- loop

void ControlPlane::StartLoop() {
  loop_ = std::thread([this] { LoopMain(); });
}

void ControlPlane::StopLoop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void ControlPlane::Kick() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    kicked_ = true;
  }
  loop_cv_.notify_one();
}

void ControlPlane::LoopMain() {
  const DurationMs tick = std::min(config_.loop_tick_ms, config_.scheduler.t1_ms);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(loop_mu_);
      loop_cv_.wait_for(lock, std::chrono::milliseconds(tick), [&] { return kicked_ || stop_; });
      if (stop_) return;
      kicked_ = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t passes = sched_->stats().passes;
    const int64_t t0 = clock_.NowNs();
    sched_->Tick();
    if (sched_->stats().passes != passes) pass_seconds_.Observe((clock_.NowNs() - t0) * 1e-9);
    (void)Flush();
  }
}

// ---------------------------------------------------------------- flush

Status ControlPlane::Flush() {
  Status status = Status::Ok();
  for (int round = 0; round < 8; ++round) {
    std::vector<core::Action> actions = sched_->TakeActions();
    for (const core::Action& a : actions) {
      if (a.kind != core::Action::Kind::kAssign) continue;
      const core::Task* t = sched_->GetTask(a.task);
      if (t != nullptr && t->placement) last_placement_[a.task] = *t->placement;
    }
    std::vector<TaskId> changed = sched_->TakeChangedTasks();
    std::erase_if(changed, [&](TaskId id) {
      const core::Task& t = *sched_->GetTask(id);
      const std::array<int64_t, 5> print{static_cast<int64_t>(t.state), t.attempts, t.fail_cnt,
                                         t.pt, static_cast<int64_t>(t.history.size())};
      auto [it, fresh] = persisted_.try_emplace(id, print);
      if (!fresh && it->second == print) return true;
      it->second = print;
      return false;
    });
    if (!changed.empty()) {
      std::vector<store::TaskRecord> records;
      records.reserve(changed.size());
      for (TaskId id : changed) {
        store::TaskRecord r{*sched_->GetTask(id), std::nullopt};
        if (auto it = last_placement_.find(id); it != last_placement_.end()) {
          r.last_placement = it->second;
        }
        records.push_back(std::move(r));
      }
      Status s = store_->PutTasks(records);
      if (!s.ok()) {
        ++store_errors_;
        std::cerr << "gpusched server: " << s.ToString() << "\n";
        status = s;
      }
      ++version_;
      for (TaskId id : changed) change_log_.emplace_back(version_, id.value());
      while (change_log_.size() > kMaxChangeLog) change_log_.pop_front();
      changes_cv_.notify_all();
    }
    bool again = false;
    SendActions(actions, again);
    if (!again) break;
  }
  return status;
}

// Assignments go to the node's agent; with no agent connected the bind fails at once, which
// releases the reservation and counts an execution failure (DESIGN.md pipeline step 5).
void ControlPlane::SendActions(std::vector<core::Action>& actions, bool& again) {
  for (core::Action& a : actions) {
    auto conn = connections_.find(a.node);
    if (a.kind == core::Action::Kind::kKill) {
      if (conn == connections_.end()) continue;
      v1::ServerMessage m;
      v1::Kill* k = m.mutable_kill();
      k->set_id(a.task.value());
      k->set_attempt(a.attempt);
      k->set_reason(a.reason);
      conn->second->Send(std::move(m));
      continue;
    }
    if (conn == connections_.end()) {
      (void)sched_->TaskFinished(a.task, a.attempt, -1, 0,
                                 "bind failed: the agent of node " + a.node + " is not connected");
      again = true;
      continue;
    }
    const core::Task& t = *sched_->GetTask(a.task);
    v1::ServerMessage m;
    v1::Assign* as = m.mutable_assign();
    as->set_id(a.task.value());
    as->set_attempt(a.attempt);
    as->set_name(t.spec.name);
    for (int g : a.gpus) as->add_gpus(g);
    for (MiB mib : a.gpu_mem_mib) as->add_gpu_mem_mib(mib);
    for (const std::string& c : t.spec.command) as->add_command(c);
    for (const auto& [k, v] : t.spec.env) (*as->mutable_env())[k] = v;
    conn->second->Send(std::move(m));
  }
}

// ---------------------------------------------------------------- API

v1::Task ControlPlane::TaskProto(const core::Task& t, bool with_history) const {
  v1::Task p;
  auto it = last_placement_.find(t.id);
  rpc::TaskToProto(t, it == last_placement_.end() ? nullptr : &it->second, with_history, &p);
  return p;
}

StatusOr<TaskId> ControlPlane::Submit(core::TaskSpec spec) {
  TaskId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    GS_ASSIGN_OR_RETURN(id, sched_->Submit(std::move(spec)));
    ++submitted_;
    Status s = Flush();
    if (!s.ok()) return Unavailable("task " + id.ToString() + " not stored: " + s.message());
  }
  Kick();
  return id;
}

StatusOr<v1::Task> ControlPlane::GetTask(uint64_t id, bool with_history) {
  std::lock_guard<std::mutex> lock(mu_);
  const core::Task* t = sched_->GetTask(TaskId(id));
  if (t == nullptr) return NotFound("task " + std::to_string(id) + ": no such task");
  return TaskProto(*t, with_history);
}

std::vector<v1::Task> ControlPlane::ListTasks(std::optional<core::TaskState> state) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Task> out;
  for (const core::Task* t : sched_->Tasks()) {
    if (state && t->state != *state) continue;
    out.push_back(TaskProto(*t, false));
  }
  return out;
}

StatusOr<v1::Task> ControlPlane::Cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(sched_->Cancel(TaskId(id)));
  GS_RETURN_IF_ERROR(Flush());
  return TaskProto(*sched_->GetTask(TaskId(id)), false);
}

StatusOr<v1::WhyResponse> ControlPlane::Why(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(core::Explanation e, sched_->Explain(TaskId(id)));
  v1::WhyResponse r;
  rpc::ExplanationToProto(e, &r);
  return r;
}

StatusOr<v1::Node> ControlPlane::NodeProto(const std::string& node) const {
  auto index = sched_->cluster().Find(node);
  if (!index) return NotFound("node " + node + ": no such node");
  v1::Node p;
  rpc::NodeToProto(sched_->cluster().node(*index), sched_->cluster(),
                   connections_.count(node) > 0, &p);
  return p;
}

std::vector<v1::Node> ControlPlane::ListNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, v1::Node> sorted;
  for (const core::NodeState& n : sched_->cluster().nodes()) sorted[n.name] = *NodeProto(n.name);
  std::vector<v1::Node> out;
  for (auto& [name, n] : sorted) out.push_back(std::move(n));
  return out;
}

Status ControlPlane::PersistNode(const std::string& node) {
  auto index = sched_->cluster().Find(node);
  if (!index) return NotFound("node " + node + ": no such node");
  const core::NodeState& n = sched_->cluster().node(*index);
  store::NodeRecord r;
  r.spec.name = n.name;
  r.spec.address = n.address;
  r.spec.capacity = n.capacity;
  for (const core::GpuState& g : n.gpus) {
    r.spec.gpus.push_back({sched_->cluster().ModelName(g.model_id), g.total_mib});
  }
  r.spec.labels = n.labels;
  r.spec.taints = n.taints;
  r.cordoned = n.cordoned;
  r.draining = n.draining;
  return store_->PutNode(r);
}

StatusOr<v1::Node> ControlPlane::Cordon(const std::string& node, bool cordon) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    GS_RETURN_IF_ERROR(sched_->Cordon(node, cordon));
    GS_RETURN_IF_ERROR(PersistNode(node));
    GS_RETURN_IF_ERROR(Flush());
  }
  Kick();
  std::lock_guard<std::mutex> lock(mu_);
  return NodeProto(node);
}

StatusOr<v1::Node> ControlPlane::Drain(const std::string& node) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    GS_RETURN_IF_ERROR(sched_->Drain(node));
    GS_RETURN_IF_ERROR(PersistNode(node));
    GS_RETURN_IF_ERROR(Flush());
  }
  Kick();
  std::lock_guard<std::mutex> lock(mu_);
  return NodeProto(node);
}

StatusOr<ControlPlane::LogSource> ControlPlane::LogSourceOf(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const core::Task* t = sched_->GetTask(TaskId(id));
  if (t == nullptr) return NotFound("task " + std::to_string(id) + ": no such task");
  LogSource src;
  src.done = core::IsTerminal(t->state);
  src.attempt = t->attempts;
  auto last = last_placement_.find(t->id);
  if (last == last_placement_.end()) return src;  // never ran: no log yet
  auto index = sched_->cluster().Find(last->second.node);
  if (index) src.address = sched_->cluster().node(*index).address;
  return src;
}

uint64_t ControlPlane::WaitForChanges(uint64_t since, DurationMs timeout_ms,
                                      std::vector<uint64_t>& ids, bool& everything) {
  std::unique_lock<std::mutex> lock(mu_);
  changes_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return version_ > since; });
  everything = !change_log_.empty() && change_log_.front().first > since + 1;
  std::set<uint64_t> unique;
  for (auto it = change_log_.rbegin(); it != change_log_.rend() && it->first > since; ++it) {
    unique.insert(it->second);
  }
  ids.assign(unique.begin(), unique.end());
  return version_;
}

// ---------------------------------------------------------------- agents

void ControlPlane::UpdateReachable(const std::string& node) {
  auto probe = probe_ok_.find(node);
  const bool ok = connections_.count(node) > 0 && (probe == probe_ok_.end() || probe->second);
  (void)sched_->SetNodeReachable(node, ok);
}

Status ControlPlane::AgentRegistered(const core::NodeSpec& spec,
                                     std::shared_ptr<AgentConnection> conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    GS_RETURN_IF_ERROR(sched_->RegisterNode(spec));
    auto old = connections_.find(spec.name);
    if (old != connections_.end() && old->second != conn) old->second->Close();
    connections_[spec.name] = std::move(conn);
    probe_ok_.erase(spec.name);  // a fresh connection proves the address for now
    UpdateReachable(spec.name);
    GS_RETURN_IF_ERROR(sched_->HandleNodeHeartbeat({spec.name, {}, {}}));
    GS_RETURN_IF_ERROR(PersistNode(spec.name));
    (void)Flush();
  }
  Kick();
  return Status::Ok();
}

void ControlPlane::AgentMessage(const std::string& node, const v1::AgentMessage& m,
                                AgentConnection& conn) {
  bool kick = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.has_heartbeat()) {
      core::NodeHeartbeat hb;
      hb.node = node;
      hb.gpu_free_mib.assign(m.heartbeat().gpu_free_mib().begin(),
                             m.heartbeat().gpu_free_mib().end());
      for (const v1::TaskRef& r : m.heartbeat().running()) {
        hb.running.emplace_back(TaskId(r.id()), r.attempt());
      }
      Status s = sched_->HandleNodeHeartbeat(hb);
      if (!s.ok()) std::cerr << "gpusched server: heartbeat of " << node << ": " << s.ToString() << "\n";
    } else if (m.has_task_heartbeats()) {
      for (const v1::TaskRef& r : m.task_heartbeats().tasks()) {
        (void)sched_->TaskHeartbeat(TaskId(r.id()), r.attempt());  // stale ones are ignored
      }
    } else if (m.has_status()) {
      const v1::TaskStatus& st = m.status();
      const TaskId id(st.id());
      if (st.kind() == v1::TaskStatus::STARTED) {
        (void)sched_->TaskStarted(id, st.attempt());
      } else {
        const core::Task* t = sched_->GetTask(id);
        Status s = sched_->TaskFinished(id, st.attempt(), st.exit_code(), st.peak_gpu_mem_mib(),
                                        st.reason());
        if (s.ok() && st.peak_gpu_mem_mib() > 0 && t->spec.profile) {
          (void)store_->AddMemoryObservation({*t->spec.profile, st.peak_gpu_mem_mib()});
        }
        kick = true;
      }
      // Acknowledged once stored (Flush), so the agent stops resending it.
      const bool stored = Flush().ok();
      if (stored && st.kind() == v1::TaskStatus::FINISHED) {
        v1::ServerMessage ack;
        ack.mutable_ack()->set_id(st.id());
        ack.mutable_ack()->set_attempt(st.attempt());
        conn.Send(std::move(ack));
      }
      if (kick) Kick();
      return;
    }
    (void)Flush();
  }
}

void ControlPlane::AgentDisconnected(const std::string& node, const AgentConnection* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(node);
  if (it == connections_.end() || it->second.get() != conn) return;  // replaced already
  connections_.erase(it);
  UpdateReachable(node);
  (void)Flush();
}

// ---------------------------------------------------------------- probe daemon

std::vector<std::pair<std::string, std::string>> ControlPlane::ProbeTargets() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const core::NodeState& n : sched_->cluster().nodes()) {
    if (connections_.count(n.name) > 0) out.emplace_back(n.name, n.address);
  }
  return out;
}

void ControlPlane::SetProbeResult(const std::string& node, bool reachable) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    probe_ok_[node] = reachable;
    UpdateReachable(node);
    (void)Flush();
  }
  Kick();
}

// ---------------------------------------------------------------- metrics

std::string ControlPlane::MetricsText() {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  MetricHeader("gpusched_queue_depth", "gauge", "Tasks waiting, by queue (Q main, FQ failure).",
               out);
  MetricLine("gpusched_queue_depth", "queue=\"Q\"", double(sched_->main_queue_size()), out);
  MetricLine("gpusched_queue_depth", "queue=\"FQ\"", double(sched_->failure_queue_size()), out);
  std::map<std::string, int64_t> by_state;
  for (const core::Task* t : sched_->Tasks()) ++by_state[core::TaskStateName(t->state)];
  MetricHeader("gpusched_tasks", "gauge", "Tasks by state.", out);
  for (const auto& [state, n] : by_state) {
    MetricLine("gpusched_tasks", "state=\"" + state + "\"", double(n), out);
  }
  const core::SchedulerStats& s = sched_->stats();
  MetricHeader("gpusched_tasks_submitted_total", "counter", "Tasks accepted.", out);
  MetricLine("gpusched_tasks_submitted_total", "", double(submitted_), out);
  MetricHeader("gpusched_scheduling_passes_total", "counter", "Scheduling passes.", out);
  MetricLine("gpusched_scheduling_passes_total", "", double(s.passes), out);
  MetricHeader("gpusched_decisions_total", "counter", "Placement attempts, by result.", out);
  MetricLine("gpusched_decisions_total", "result=\"placed\"", double(s.placed), out);
  MetricLine("gpusched_decisions_total", "result=\"waiting\"", double(s.decisions - s.placed),
             out);
  MetricHeader("gpusched_execution_failures_total", "counter", "Execution failures.", out);
  MetricLine("gpusched_execution_failures_total", "", double(s.execution_failures), out);
  MetricHeader("gpusched_nodes_lost_total", "counter", "Nodes lost (no heartbeat).", out);
  MetricLine("gpusched_nodes_lost_total", "", double(s.nodes_lost), out);
  MetricHeader("gpusched_tasks_reclaimed_total", "counter", "Tasks reclaimed (no heartbeat).",
               out);
  MetricLine("gpusched_tasks_reclaimed_total", "", double(s.tasks_reclaimed), out);
  MetricHeader("gpusched_store_errors_total", "counter", "Failed store writes.", out);
  MetricLine("gpusched_store_errors_total", "", double(store_errors_), out);
  MetricHeader("gpusched_decision_latency_seconds", "histogram",
               "Duration of one scheduling pass (all decisions of a snapshot of Q).", out);
  pass_seconds_.Render("gpusched_decision_latency_seconds", out);
  MetricHeader("gpusched_node_gpu_memory_mib", "gauge",
               "GPU memory per node and GPU: total, allocated (reserved) and reported free.", out);
  for (const core::NodeState& n : sched_->cluster().nodes()) {
    for (const core::GpuState& g : n.gpus) {
      const std::string l = "node=\"" + LabelValue(n.name) + "\",gpu=\"" +
                            std::to_string(g.index) + "\",kind=\"";
      MetricLine("gpusched_node_gpu_memory_mib", l + "total\"", double(g.total_mib), out);
      MetricLine("gpusched_node_gpu_memory_mib", l + "allocated\"", double(g.allocated_mib), out);
      if (g.reported_free_mib >= 0) {
        MetricLine("gpusched_node_gpu_memory_mib", l + "free\"", double(g.reported_free_mib), out);
      }
    }
  }
  MetricHeader("gpusched_node_up", "gauge", "1 if the node is reachable and available.", out);
  for (const core::NodeState& n : sched_->cluster().nodes()) {
    MetricLine("gpusched_node_up", "node=\"" + LabelValue(n.name) + "\"",
               n.reachable && n.available ? 1 : 0, out);
  }
  return out;
}

}  // namespace gpusched::server
