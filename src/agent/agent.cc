#include "agent/agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "agent/agent_env.h"
#include "agent/agent_messages.h"
#include "agent/cluster_membership.h"
#include "agent/executor_status.h"
#include "agent/exit_report.h"
#include "agent/gpu_discovery.h"
#include "agent/gpu_handover.h"
#include "agent/gpu_memory_watchdog.h"
#include "agent/gpu_monitor.h"
#include "agent/launch_spec.h"
#include "agent/log_service.h"
#include "agent/noop_executor.h"
#include "agent/process_runner.h"
#include "agent/rank_launcher.h"
#include "agent/server_link.h"
#include "agent/task_files.h"
#include "agent/task_cgroup.h"
#include "agent/task_user.h"
#include "agent/unacked_exits.h"
#include "agent/work_queue.h"
#include "base/clock.h"
#include "base/cluster_id.h"
#include "base/units.h"
#include "base/host_port.h"
#include "base/log.h"
#include "base/private_dir.h"
#include "base/thread_name.h"
#include "core/gpu_health.h"
#include "core/reserved_env.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/convert.h"
#include "rpc/grpc_log.h"
#include "rpc/leader_hint.h"
#include "rpc/log_capability.h"

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

StatusOr<ExecutorKind> ParseExecutorKind(std::string_view name) {
  if (name == "process") return ExecutorKind::kProcess;
  if (name == "noop") return ExecutorKind::kNoop;
  return InvalidArgument("--executor: \"" + std::string(name) + "\" (use process or noop)");
}

// Locks: launch_mu, then the link's send lock, then mu (Register runs under the send lock and
// reads `unacked`), and launch_mu, then the executor's (OnAssign launches under launch_mu);
// the executors hold none of their locks while they call OnExit.
//
// Threads (issue 40): the link thread (ServerLink::Run) reads the server's messages and hands
// assignments, kills and acks to the work thread in order (a bounded queue), so a slow account
// lookup or process launch never stops the stream (the node heartbeats the heartbeat thread
// queues are written by the link thread's completion queue) nor holds the send lock.
struct Agent::Impl {
  AgentConfig config;
  RealClock clock;
  std::unique_ptr<GpuDiscovery> gpus;
  // The node's filesystem as the agent itself uses it (agent_env.h): NUMA CPU lists, the
  // data dir, the cluster files, the sweep of old task files.
  std::unique_ptr<AgentEnv> env = std::make_unique<RealAgentEnv>();
  std::string log_dir;
  DirFd log_dir_fd;  // log_dir: every task file is opened relative to it (task_files.h)
  std::string address;
  std::unique_ptr<LogService> log_service;
  std::unique_ptr<grpc::Server> log_server;
  std::unique_ptr<TaskExecutor> executor;
  std::shared_ptr<TaskCgroups> cgroups;  // the process executor's; null with noop
  // The GPUs' health, the GPU tasks' shares, memory and use (gpu_monitor.h).
  std::unique_ptr<GpuMonitor> monitor;
  // Guarded by mu (gpu_handover.h): GPU tasks told to stop, and the assignments that wait
  // for them: a preemptor starts on its GPUs only once the victim has exited.
  GpuHandover handover{[this](const TaskKey& task) { return monitor->GpusOf(task); }};
  // Heartbeat thread only. Each task's heartbeat file is the one the agent made for it.
  ExecutorObserver observer{"/proc", [this](const TaskKey& key) {
                              return LogPath(log_dir, key.first, key.second) + ".heartbeat";
                            }};
  std::set<TaskKey> hung;                    // heartbeat thread only: logged as hung
  NodeLaunchFacts launch_facts;  // set by Start: what BuildLaunchSpec needs of this node

  std::atomic<int64_t> node_hb_ms{1000}, task_hb_ms{1000}, kill_grace_ms{10'000};
  // Issue 37: the server's node_lost_after (0 = not said), and when this agent last ran, on
  // the monotonic clock: a gap longer than node_lost_after means it was paused while the
  // server gave its tasks up (StopStaleAfterPause).
  std::atomic<int64_t> node_lost_after_ms{0};
  std::atomic<int64_t> last_awake_ms{0};
  std::string instance;  // this process's id over its reconnections (RegisterNode)
  rpc::ClientTls tls;                // config.tls_dir's; disabled = plaintext
  bool run_as_users = false;         // root: tasks run as the account their spec names
  std::atomic<bool> allow_root_tasks{false};  // the server's allow_root_tasks
  rpc::LogReadKey log_read_key;  // this registration's (issue 35): signs the server's log reads
  std::mutex mu;  // guards everything below up to link
  std::condition_variable cv;
  bool stop = false;
  bool down = false;
  // Finished, not yet acknowledged by the server (unacked_exits.h). With the process
  // executor the journal backs it: an agent restarted before the ack refills it from there
  // (Open reports them).
  UnackedExits unacked;
  // Issue 39 (cluster_membership.h): the cluster this node's task files belong to, the
  // change to another one, and the old cluster's tasks and exits, never reported. Set by
  // Start (OpenDataDir); its own lock, taken after mu.
  std::unique_ptr<ClusterMembership::Host> cluster_host;
  std::unique_ptr<ClusterMembership> membership;
  // The stream to the server (server_link.h): the link, heartbeat, work and executor threads
  // all send through it; its send lock orders the messages.
  std::unique_ptr<ServerLink> link;
  // Held across a launch and its STARTED report, and by every exit report: a task that ends
  // at once is never reported finished before started. Not the send lock: heartbeats go on.
  std::mutex launch_mu;
  // Guarded by mu (work_queue.h): the server's assignments, kills and acks for the work
  // thread, in the order received, and the assignment it handles; at most
  // AgentWorkQueue::kMaxAssigns assignments (more are refused, retryable).
  AgentWorkQueue work;
  std::thread work_thread;
  std::thread link_thread, heartbeat_thread;

  // Queues `m` on the connection (dropped while there is none: the next Register carries
  // what the server must know). Never waits for the network.
  void Send(v1::AgentMessage m) { link->Send(std::move(m)); }
  // Through the daemons' logger (base/log.h), as component "agent" with this node's name.
  void Log(const std::string& line, logging::Level level = logging::Level::kInfo,
           std::optional<uint64_t> task = std::nullopt) {
    logging::Fields fields = logging::NodeF(config.name);
    fields.task = task;
    if (!config.quiet) logging::Log(level, "agent", line, fields);
  }
  // Issue 39: at a process task's exit, its log's time becomes the exit's (the retention
  // counts from the end, not from the last line) and a truncated log is said once.
  void SettleLog(uint64_t id, const std::string& log);
  // Issue 39: removes the files of tasks that ended more than task_files_retention ago.
  void SweepTaskFiles(const std::vector<TaskKey>& running);
  v1::AgentMessage Register();
  // Issue 37: called first by every thread that wakes to act (heartbeats, Register, a server
  // message). After a pause longer than node_lost_after, stops every task here before anything
  // else: the server has re-placed them, so the copies here are stale.
  void StopStaleAfterPause();
  void HeartbeatLoop();
  void Handle(const v1::ServerMessage& m);
  // Queues an assignment, kill or ack for the work thread (refuses an assignment when
  // the queue's bound of them wait). Never waits for a launch.
  void Enqueue(v1::ServerMessage m);
  void WorkLoop();
  void HandleWork(const v1::ServerMessage& m);
  // Issue 39, on the link thread: a Registered naming cluster `id`. When it is not the one
  // the files here belong to, hands what is here to the membership as the old cluster's and
  // queues the change for the work thread, ahead of every message of the new server.
  void NoteClusterId(const v1::ServerMessage& m);
  void OnAssign(const v1::Assign& a);
  // What runs here and the assignments waiting for a GPU to be freed (both are the agent's).
  std::vector<TaskKey> RunningOrWaiting();
  // The account `user` names when tasks run as their users here (none: as the agent's).
  // Errors: the account is unknown or root (permanent for the task).
  // `root_submitted`: the server proved root submitted the task (Assign.submitted_by_root).
  StatusOr<std::optional<TaskUser>> RunAs(const std::string& user, bool root_submitted);
  bool ResendIfFinished(const v1::Assign& a);
  bool DeferBehindStopping(const v1::Assign& a);
  // Launches `spec` and reports it started, or reports why it did not (`who`: RunAs's).
  void Launch(const v1::Assign& a, const LaunchSpec& spec, const Status& who);
  void OnExit(const TaskExit& e);
  // Sends a task's final status and keeps it until acknowledged; after any STARTED being
  // sent (takes launch_mu).
  void Report(v1::TaskStatus st);
  // Report without launch_mu, for a task this agent never started.
  void ReportUnstarted(v1::TaskStatus st);
  // Stops the tasks over their GPU memory share (the watchdog, gpu_monitor.h).
  void StopTasksOverShare();
  std::map<TaskKey, TaskObservation> ObserveExecutor();
  // Agent::Start's steps, in order.
  Status OpenGpus();
  Status OpenDataDir();
  void FillLaunchFacts();
  void MakeMonitor();
  Status StartLogServer();
  Status MakeExecutor();
  void MakeLink(std::vector<std::string> servers);
  void StartThreads();
};

// What the cluster change needs of the agent (cluster_membership.h): its executor, the
// data dir's cluster files (its AgentEnv), a pause that ends when the agent stops, its logger.
class AgentClusterHost final : public ClusterMembership::Host {
 public:
  explicit AgentClusterHost(Agent::Impl& agent) : agent_(agent) {}
  std::vector<TaskKey> Running() override { return agent_.executor->Running(); }
  void Kill(const TaskKey& task, DurationMs grace_ms, const std::string& reason) override {
    agent_.executor->Kill(task.first, task.second, grace_ms, reason);
  }
  void Acknowledge(const TaskKey& task) override {
    agent_.executor->Acknowledge(task.first, task.second);
  }
  Status Record(const std::string& id) override {
    return agent_.env->RecordClusterId(agent_.config.data_dir, id);
  }
  StatusOr<int> ArchiveTaskFiles(const std::string& old_id) override {
    return agent_.env->ArchiveTaskFiles(agent_.config.data_dir, old_id);
  }
  bool Pause(DurationMs ms) override {
    std::unique_lock<std::mutex> lock(agent_.mu);
    return agent_.cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return agent_.stop; });
  }
  bool Stopping() override {
    std::lock_guard<std::mutex> lock(agent_.mu);
    return agent_.stop;
  }
  void Log(const std::string& line, logging::Level level, std::optional<uint64_t> task) override {
    agent_.Log(line, level, task);
  }

 private:
  Agent::Impl& agent_;
};

// The share library: --preload PATH, or the one built next to this executable.
static StatusOr<std::string> FindPreload(const AgentConfig& config) {
  if (config.preload_path == "none") return std::string();
  if (!config.preload_path.empty()) {
    if (access(config.preload_path.c_str(), R_OK) != 0) {
      return InvalidArgument("preload: \"" + config.preload_path + "\" cannot be read");
    }
    return std::filesystem::absolute(config.preload_path).string();
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path beside = exe.parent_path() / "libgpusched_preload.so";
  if (ec || access(beside.c_str(), R_OK) != 0) return std::string();
  return beside.string();
}


void Agent::Impl::StopStaleAfterPause() {
  const TimeMs now = clock.MonoMs();
  const TimeMs last = last_awake_ms.exchange(now);
  const DurationMs lost_after = node_lost_after_ms.load();
  if (lost_after <= 0 || last <= 0 || now - last <= lost_after) return;
  const std::string reason = "this agent was paused for " + FormatDurationMs(now - last) +
                             ", longer than the server's node_lost_after (" +
                             FormatDurationMs(lost_after) +
                             "): the server has given its tasks up and re-placed them";
  {
    std::lock_guard<std::mutex> lock(mu);
    handover.ClearWaiting();  // never started: nothing to stop
  }
  const std::vector<TaskKey> stale = executor->Running();
  Log("stopping " + std::to_string(stale.size()) + " stale task copies: " + reason);
  for (const auto& [id, attempt] : stale) {
    executor->Kill(id, attempt, kill_grace_ms.load(), reason);
  }
}

// Runs under the link's send lock (it reads `unacked` under mu, after that lock).
v1::AgentMessage Agent::Impl::Register() {
  StopStaleAfterPause();
  NodeFacts facts;
  facts.spec.name = config.name;
  facts.spec.address = address;
  facts.spec.capacity = HostCapacity();
  for (const GpuInfo& g : gpus->gpus()) facts.spec.gpus.push_back({g.model, g.total_mib});
  facts.spec.labels = config.labels;
  facts.spec.taints = config.taints;
  facts.spec.topology = launch_facts.topology;
  facts.instance = instance;
  facts.simulated = gpus->simulated();
  // Two-way reconciliation: what runs here now (adopted tasks included) and every exit the
  // server has not acknowledged. This replaces resending the unacknowledged statuses.
  const std::vector<TaskKey> running = RunningOrWaiting();
  std::lock_guard<std::mutex> lock(mu);
  v1::AgentMessage m = RegistrationMessage(facts, running, membership->id());
  unacked.AddTo(m.mutable_register_(), clock.NowMs());
  return m;
}

std::vector<TaskKey> Agent::Impl::RunningOrWaiting() {
  std::vector<TaskKey> out = executor->Running();
  std::lock_guard<std::mutex> lock(mu);
  for (const TaskKey& key : handover.Waiting()) out.push_back(key);
  for (const TaskKey& key : work.QueuedAssigns()) out.push_back(key);  // for the work thread
  if (work.launching()) out.push_back(*work.launching());
  std::sort(out.begin(), out.end());  // once: a launch under way may be in Running already
  out.erase(std::unique(out.begin(), out.end()), out.end());
  membership->RemoveOld(&out);
  return out;
}

void Agent::Impl::HeartbeatLoop() {
  TimeMs next_node = 0, next_task = 0, next_sweep = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      const DurationMs period = std::min(node_hb_ms.load(), task_hb_ms.load());
      if (cv.wait_for(lock, std::chrono::milliseconds(std::max<DurationMs>(period / 2, 5)),
                      [&] { return stop; })) {
        return;
      }
    }
    StopStaleAfterPause();
    const TimeMs now = clock.MonoMs();  // issue 37: a wall-clock step changes no period
    const auto running = RunningOrWaiting();
    if (config.executor == ExecutorKind::kProcess && config.task_files_retention_ms > 0 &&
        now >= next_sweep) {
      SweepTaskFiles(running);
      next_sweep = now + std::clamp<DurationMs>(config.task_files_retention_ms / 4, 1000, 60'000);
    }
    if (now >= next_node) {
      // CN109992422A claims 5-6: the node heartbeat, with per-GPU free memory and health.
      const std::vector<MiB> free = gpus->FreeMib();
      const std::vector<core::GpuHealthView> health = monitor->CheckHealth();
      StopTasksOverShare();
      Send(NodeHeartbeatMessage(free, health, running));
      next_node = now + node_hb_ms.load();
    }
    if (now >= next_task && !running.empty()) {
      // CN109992422A claim 7: task heartbeats, batched per node, with the executor's status
      // (running, or hung: stopped, heartbeat file stale) and each GPU task's use of its
      // GPUs. A hung task's heartbeat says so: the server reclaims it after T_task (claim 8).
      const std::map<TaskKey, GpuMonitor::Use> use = monitor->MeasureUse();
      const std::map<TaskKey, TaskObservation> seen = ObserveExecutor();
      Send(TaskHeartbeatsMessage(running, use, seen, config.executor == ExecutorKind::kProcess));
      next_task = now + task_hb_ms.load();
    }
  }
}

void Agent::Impl::Handle(const v1::ServerMessage& m) {
  StopStaleAfterPause();
  if (m.has_registered()) {
    node_lost_after_ms = std::max<int64_t>(m.registered().node_lost_after_ms(), 0);
    node_hb_ms = std::max<int64_t>(m.registered().node_heartbeat_ms(), 10);
    task_hb_ms = std::max<int64_t>(m.registered().task_heartbeat_ms(), 10);
    kill_grace_ms = std::max<int64_t>(m.registered().kill_grace_ms(), 0);
    allow_root_tasks = m.registered().allow_root_tasks();
    log_read_key.Set(m.registered().log_read_key());
    cv.notify_all();
    NoteClusterId(m);
  } else {
    Enqueue(m);
  }
}

void Agent::Impl::Enqueue(v1::ServerMessage m) {
  const TaskKey key{m.assign().id(), m.assign().attempt()};  // an assignment's, if refused
  {
    std::lock_guard<std::mutex> lock(mu);
    if (work.Push(std::move(m))) return;
  }
  v1::TaskStatus st;  // not run: the server places it again (a retryable failure)
  st.set_id(key.first);
  st.set_attempt(key.second);
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(127);
  st.set_reason("launch failed: " + std::to_string(work.max_assigns()) +
                " assignments wait for their launch on this agent");
  ReportUnstarted(st);  // not behind a launch under way: the link thread never waits
}

void Agent::Impl::WorkLoop() {
  for (;;) {
    std::optional<v1::ServerMessage> m;
    {
      std::unique_lock<std::mutex> lock(mu);
      m = work.Pop(lock);
    }
    if (!m) return;  // stopped: what is queued is the next Register's to reconcile
    HandleWork(*m);
    std::lock_guard<std::mutex> lock(mu);
    work.Done();
  }
}

void Agent::Impl::HandleWork(const v1::ServerMessage& m) {
  if (m.has_assign()) {
    OnAssign(m.assign());
  } else if (m.has_kill()) {
    // A task this agent does not run is ignored by the executor.
    // A preemption carries the victim's own grace; other kills use the server's kill_grace.
    const int64_t grace = m.kill().has_grace_ms() ? std::max<int64_t>(m.kill().grace_ms(), 0)
                                                  : kill_grace_ms.load();
    const TaskKey key{m.kill().id(), m.kill().attempt()};
    {
      std::lock_guard<std::mutex> lock(mu);
      if (handover.OnKill(key)) return;  // killed while it waited for a GPU: it never runs
    }
    executor->Kill(key.first, key.second, grace, m.kill().reason());
  } else if (m.has_registered()) {
    membership->Join(m.registered().cluster_id(), kill_grace_ms.load());
  } else if (m.has_ack()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      unacked.Acknowledge({m.ack().id(), m.ack().attempt()});
    }
    executor->Acknowledge(m.ack().id(), m.ack().attempt());
    if (config.executor != ExecutorKind::kProcess) return;  // no process wrote a side file
    const std::string log = LogFileName(m.ack().id(), m.ack().attempt());
    for (const char* side : {".peak", ".gpumem", ".gpuutil", ".heartbeat", ".share"}) {
      unlinkat(log_dir_fd.get(), (log + side).c_str(), 0);  // the name, never a link's target
    }
  }
}

// ---------------------------------------------------------------- cluster (issue 39)

void Agent::Impl::NoteClusterId(const v1::ServerMessage& m) {
  std::lock_guard<std::mutex> lock(mu);
  const ClusterMembership::Change change = membership->Note(m.registered().cluster_id());
  if (change == ClusterMembership::Change::kNone) return;
  if (change == ClusterMembership::Change::kLeave) {
    // Everything here now is the old cluster's: what runs (or is being launched), what
    // waits for a GPU or in the queue (assignments of the old server, never started), and
    // the exits it was not told of. From now on none of it is reported to the new server.
    std::vector<TaskKey> old = executor->Running();
    if (work.launching()) old.push_back(*work.launching());
    handover.ClearWaiting();
    work.Clear();
    membership->MarkOld(old, unacked.TakeAll());
  }
  work.Push(m);  // behind what is queued (if that is not the old cluster's: cleared)
}

StatusOr<std::optional<TaskUser>> Agent::Impl::RunAs(const std::string& user,
                                                     bool root_submitted) {
  // An ordinary user cannot switch users: every task runs as the agent (said at start).
  if (user.empty() || !run_as_users || config.executor != ExecutorKind::kProcess) {
    return std::optional<TaskUser>();
  }
  GS_ASSIGN_OR_RETURN(TaskUser u, LookUpTaskUser(user, config.name,
                                                  allow_root_tasks.load() || root_submitted));
  return std::optional<TaskUser>(std::move(u));
}

// It ran here already (its exit is not acknowledged yet): says so again rather than run it
// twice. True when it did.
bool Agent::Impl::ResendIfFinished(const v1::Assign& a) {
  std::optional<v1::TaskStatus> finished;
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = unacked.Find({a.id(), a.attempt()});
  }
  if (!finished) return false;
  v1::AgentMessage m;
  *m.mutable_status() = *finished;
  Send(m);
  return true;
}

// A task being stopped still holds one of `a`'s GPUs: `a` waits for its exit (OnExit queues
// it again). True when it waits.
bool Agent::Impl::DeferBehindStopping(const v1::Assign& a) {
  std::lock_guard<std::mutex> lock(mu);
  const std::optional<TaskKey> victim = handover.Defer(a);
  if (!victim) return false;
  Log("task " + std::to_string(a.id()) + " waits for task " + std::to_string(victim->first) +
          " to stop on its GPUs",
      logging::Level::kInfo, a.id());
  return true;
}

void Agent::Impl::OnAssign(const v1::Assign& a) {
  if (ResendIfFinished(a) || DeferBehindStopping(a)) return;
  StatusOr<std::optional<TaskUser>> who = RunAs(a.user(), a.submitted_by_root());
  const LaunchSpec spec =
      BuildLaunchSpec(a, who.ok() ? *who : std::optional<TaskUser>(), launch_facts);
  if (a.gpus_size() > 0) {
    TaskShare share;
    share.gpus.assign(a.gpus().begin(), a.gpus().end());
    share.share_mib.assign(a.gpu_mem_mib().begin(), a.gpu_mem_mib().end());
    monitor->AddTask({a.id(), a.attempt()}, std::move(share));
  }
  Launch(a, spec, who.status());
}

void Agent::Impl::Launch(const v1::Assign& a, const LaunchSpec& spec, const Status& who) {
  v1::TaskStatus st;
  st.set_id(a.id());
  st.set_attempt(a.attempt());
  Status s = who;
  if (who.ok()) {
    // Launch and STARTED under launch_mu: an exit report (Report takes launch_mu) of a task
    // that ends at once (/bin/true, a noop task without duration) cannot overtake STARTED.
    // The executors never wait for their exit callbacks in Launch, so this cannot deadlock.
    std::lock_guard<std::mutex> order(launch_mu);
    s = executor->Launch(spec);
    if (s.code() == StatusCode::kAlreadyExists) return;  // a repeated assignment
    if (s.ok()) {
      st.set_kind(v1::TaskStatus::STARTED);
      link->SendWith([&]() -> std::optional<v1::AgentMessage> {
        std::lock_guard<std::mutex> lock(mu);  // issue 39: never a start of the old cluster's
        if (membership->IsOld({a.id(), a.attempt()})) return std::nullopt;
        v1::AgentMessage m;
        *m.mutable_status() = st;
        return m;
      });
      return;
    }
  }
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(127);
  st.set_reason("launch failed: " + s.message());
  // A retry would fail the same way: no such command, directory or user; a root account.
  st.set_permanent(s.code() == StatusCode::kNotFound ||
                   (!who.ok() && who.code() == StatusCode::kFailedPrecondition));
  Report(st);
}

// The watchdog's stops: what each task's processes hold per GPU (NVML), against its share.
void Agent::Impl::StopTasksOverShare() {
  for (const WatchdogStop& stop : monitor->WatchMemory()) {
    Log("task " + std::to_string(stop.task.first) + " " + stop.reason, logging::Level::kWarn,
        stop.task.first);
    executor->Kill(stop.task.first, stop.task.second, kill_grace_ms.load(), stop.reason);
  }
}

// The executor's status of each task with a known process (executor_status.h); a task that
// turns hung, or recovers, is logged once.
std::map<TaskKey, TaskObservation> Agent::Impl::ObserveExecutor() {
  std::map<TaskKey, TaskObservation> seen = observer.Observe(executor->Processes(), clock.NowMs());
  std::set<TaskKey> now_hung;
  for (const auto& [key, o] : seen) {
    if (o.health == TaskHealth::kRunning) continue;
    now_hung.insert(key);
    if (!hung.count(key)) {
      Log("task " + std::to_string(key.first) + " hung: " + o.detail, logging::Level::kWarn,
          key.first);
    }
  }
  for (const TaskKey& key : hung) {
    if (!now_hung.count(key) && seen.count(key)) {
      Log("task " + std::to_string(key.first) + " runs again", logging::Level::kInfo, key.first);
    }
  }
  hung = std::move(now_hung);
  return seen;
}

void Agent::Impl::SettleLog(uint64_t id, const std::string& log) {
  utimensat(log_dir_fd.get(), log.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // now
  const std::string tail = ReadTaskFile(log_dir_fd.get(), log, 128, /*tail=*/true).value_or("");
  const size_t note = tail.rfind("gpusched: output truncated after ");
  if (note == std::string::npos) return;
  std::string said = tail.substr(note);
  while (!said.empty() && said.back() == '\n') said.pop_back();
  Log("output over log_max_size was dropped (" + said + ")", logging::Level::kWarn, id);
}

void Agent::Impl::SweepTaskFiles(const std::vector<TaskKey>& running) {
  std::set<std::pair<uint64_t, int64_t>> keep(running.begin(), running.end());
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const TaskKey& key : unacked.Tasks()) keep.insert(key);
  }
  const int removed = env->RemoveOldTaskFiles(
      log_dir_fd.get(), clock.NowMs() - config.task_files_retention_ms, keep);
  if (removed > 0) {
    Log("removed " + std::to_string(removed) + " files of tasks that ended more than " +
        FormatDurationMs(config.task_files_retention_ms) + " ago (task_files_retention)");
  }
}

void Agent::Impl::OnExit(const TaskExit& e) {
  if (membership->DropOldExit(e)) {  // issue 39: the old cluster's, acknowledged here
    std::lock_guard<std::mutex> lock(mu);
    monitor->RemoveTask({e.id, e.attempt});
    handover.Forget({e.id, e.attempt});
    return;
  }
  // Only a process writes a peak file, a ledger or a log: the noop executor's tasks have
  // none to read (three opens per task saved where tasks are thousands per second).
  const bool has_files = config.executor == ExecutorKind::kProcess;
  const std::string log = LogFileName(e.id, e.attempt);
  if (has_files) SettleLog(e.id, log);
  std::vector<v1::Assign> ready;  // assignments that waited for this task's GPUs
  MiB measured = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    measured = monitor->RemoveTask({e.id, e.attempt});
    ready = handover.OnExit({e.id, e.attempt});
  }
  const ExitEvidence evidence = has_files ? ReadExitEvidence(log_dir_fd.get(), log) : ExitEvidence{};
  Report(ExitReport(e, clock.NowMs(), measured, evidence));
  for (const v1::Assign& a : ready) {  // their GPUs are free now
    v1::ServerMessage m;
    *m.mutable_assign() = a;
    Enqueue(std::move(m));
  }
}

void Agent::Impl::Report(v1::TaskStatus st) {
  std::lock_guard<std::mutex> order(launch_mu);  // after a STARTED being sent
  ReportUnstarted(std::move(st));
}

// Under the link's send lock throughout, so a Register being written either carries the
// status in `finished` or precedes the status message: never both, never neither.
void Agent::Impl::ReportUnstarted(v1::TaskStatus st) {
  link->SendWith([&]() -> std::optional<v1::AgentMessage> {
    {
      std::lock_guard<std::mutex> lock(mu);
      // Issue 39: a launch of the old cluster's that failed: no new server hears of it.
      if (membership->ForgetOld({st.id(), st.attempt()})) return std::nullopt;
      unacked.Keep(st);
    }
    st.set_ended_ago_ms(EndedAgoMs(st, clock.NowMs()));
    v1::AgentMessage m;
    *m.mutable_status() = std::move(st);
    return m;
  });
}

// ---------------------------------------------------------------- Agent

// The node's name: --name, or the host name; checked as the server checks it at
// registration (with TLS, the certificate's name rule too: certs init refuses what no
// certificate file can be named).
static Status ResolveName(AgentConfig& config) {
  if (!config.name.empty()) return rpc::CheckNodeName(config.name, "name");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  config.name = host;
  if (Status s = rpc::CheckNodeName(config.name, "name"); !s.ok()) {
    return InvalidArgument(s.message() + " (this machine's host name: give --name)");
  }
  return Status::Ok();
}

// The GPUs (NVML's, else the simulated list), their interconnect, and the share library.
Status Agent::Impl::OpenGpus() {
  if (!config.simulate) {
    auto nvml = OpenNvml();
    if (nvml.ok() && !(*nvml)->gpus().empty()) gpus = std::move(nvml).value();
  }
  if (!gpus) {
    GS_ASSIGN_OR_RETURN(std::vector<GpuInfo> sim, ParseGpuList(config.gpus));
    gpus = MakeSimulatedGpus(std::move(sim));
  }
  GS_ASSIGN_OR_RETURN(launch_facts.preload, FindPreload(config));
  if (config.gpu_health_period_ms < 0) {
    return InvalidArgument("gpu-health-period: must be >= 0, got " +
                           std::to_string(config.gpu_health_period_ms) + " ms");
  }
  const int count = static_cast<int>(gpus->gpus().size());
  if (!config.topology.empty()) {
    GS_ASSIGN_OR_RETURN(launch_facts.topology, core::SimulatedTopology(config.topology, count));
  } else {
    launch_facts.topology = gpus->Topology();
  }
  if (launch_facts.preload.empty() && config.preload_path != "none") {
    Log("libgpusched_preload.so is not next to this executable: GPU memory shares of tasks "
        "are not enforced (only the watchdog, where NVML is)");
  }
  return Status::Ok();
}

// The GPU monitor, before the executor: the process runner reports exits while it opens.
void Agent::Impl::MakeMonitor() {
  GpuMonitor::Options o;
  o.fault_file = config.fault_file;
  o.memory_grace_ms = config.gpu_memory_grace_ms;
  o.health_period_ms = config.gpu_health_period_ms;
  o.task_processes = config.executor == ExecutorKind::kProcess;
  o.log_dir_fd = log_dir_fd.get();
  monitor = std::make_unique<GpuMonitor>(
      *gpus, clock, std::move(o), [this] { return executor->TaskPids(); },
      [this](const std::string& line, logging::Level level) { Log(line, level); });
}

// What BuildLaunchSpec needs of this node (the preload library was found by OpenGpus).
void Agent::Impl::FillLaunchFacts() {
  launch_facts.node_name = config.name;
  launch_facts.log_dir = log_dir;
  launch_facts.node_gpus = static_cast<int>(gpus->gpus().size());
  launch_facts.simulated_gpus = gpus->simulated();
  const char* inherited = std::getenv("LD_PRELOAD");
  launch_facts.agent_ld_preload = inherited != nullptr ? inherited : "";
  launch_facts.numa_cpus = env->NumaCpus();
  launch_facts.log_max_bytes = config.log_max_size_bytes;
}

// The data dir (private to the agent's user), its logs/ folder, this process's instance id
// and the cluster its files belong to.
Status Agent::Impl::OpenDataDir() {
  if (config.data_dir.empty()) {
    // Named after the agent, not the process: the next agent of that name adopts its tasks.
    // Never in /tmp, where another user could create the name first (issue 35).
    config.data_dir = DefaultStateDir("agent-" + config.name);
  }
  GS_ASSIGN_OR_RETURN(DataDir dir, env->OpenDataDir(config.data_dir));
  config.data_dir = std::move(dir.path);
  log_dir = std::move(dir.log_dir);
  log_dir_fd = std::move(dir.log_dir_fd);
  char host[256] = {};
  (void)gethostname(host, sizeof(host) - 1);
  instance = std::string(host) + "/" + std::to_string(getpid()) + "/" +
             std::to_string(clock.NowNs());
  GS_ASSIGN_OR_RETURN(std::string cluster_id, env->ReadClusterId(config.data_dir));
  cluster_host = std::make_unique<AgentClusterHost>(*this);
  membership = std::make_unique<ClusterMembership>(*cluster_host, clock, std::move(cluster_id),
                                                   config.data_dir + "/clusters");
  return Status::Ok();
}

// The log service on --listen. With TLS it is mutual TLS too, answering the servers only
// (log_service.h); without TLS it answers only reads the server signed (issue 35,
// rpc/log_capability.h).
Status Agent::Impl::StartLogServer() {
  log_service = std::make_unique<LogService>(log_dir, tls.enabled(), &log_read_key, &clock);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls.enabled()) {
    grpc::SslServerCredentialsOptions o(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    o.pem_root_certs = tls.ca_pem;
    o.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
    credentials = grpc::SslServerCredentials(o);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, credentials, &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // refuse a port in use
  builder.RegisterService(log_service.get());
  std::string bind_failure;  // gRPC's reason for a port it could not bind, for our message
  {
    rpc::GrpcLogCapture bind_log;  // this call only
    log_server = builder.BuildAndStart();
    if (!log_server || port == 0) {
      bind_failure = rpc::ListenFailureReason(bind_log);
    } else {
      bind_log.Replay();
    }
  }
  if (!bind_failure.empty()) {
    return FailedPrecondition("listen: cannot listen on " + config.listen + ": " + bind_failure);
  }
  address = config.listen.substr(0, config.listen.rfind(':')) + ":" + std::to_string(port);
  return Status::Ok();
}

// The executor: noop, or real processes under gpusched-shim, each in a cgroup of its own
// (what cannot be enforced here is said once). The process runner adopts the tasks a
// previous agent left running here and reports (into `unacked`, before the link starts) the
// exits it left unacknowledged.
Status Agent::Impl::MakeExecutor() {
  auto on_exit = [this](const TaskExit& e) { OnExit(e); };
  if (config.executor == ExecutorKind::kNoop) {
    executor = std::make_unique<NoopExecutor>(clock, on_exit);
  } else {
    ProcessRunnerOptions o;
    o.journal_dir = config.data_dir + "/journal";
    o.shim_path = config.shim_path;
    cgroups = std::make_shared<TaskCgroups>(DetectCgroupLayout(*MakeRealCgroupOps()),
                                            CgroupSubtreeName(config.name, config.data_dir),
                                            MakeRealCgroupOps());
    cgroups->Init();
    Log(cgroups->Describe());
    o.cgroups = cgroups;
    GS_ASSIGN_OR_RETURN(executor, ProcessRunner::Open(clock, o, on_exit));
  }
  run_as_users = !config.run_as_self && CanRunTasksAsOtherUsers();
  if (config.run_as_self && config.executor == ExecutorKind::kProcess) {
    Log("--run-as-self: every task runs as " + DescribeOwnUser() + ", whoever submitted it");
  } else if (!run_as_users && config.executor == ExecutorKind::kProcess) {
    Log("running as " + DescribeOwnUser() + ", not root: every task runs as this user, "
        "whoever submitted it");
  }
  if (config.wrap_executor) executor = config.wrap_executor(std::move(executor));
  return Status::Ok();
}

// The link exists before the executor: the process runner reports the exits a previous agent
// left unacknowledged while it opens (sent nowhere until the link runs: Register carries them).
void Agent::Impl::MakeLink(std::vector<std::string> servers) {
  ServerLink::Hooks hooks;
  hooks.make_register = [this] { return Register(); };
  hooks.on_message = [this](const v1::ServerMessage& m) { Handle(m); };
  hooks.log = [this](const std::string& line, logging::Level level) { Log(line, level); };
  link = std::make_unique<ServerLink>(ServerLink::Options{std::move(servers), tls, config.token},
                                      std::move(hooks), clock);
}

void Agent::Impl::StartThreads() {
  work_thread = std::thread([this] {
    NameThisThread("gs-agent-work");
    WorkLoop();
  });
  link_thread = std::thread([this] {
    NameThisThread("gs-agent-link");
    link->Run();
  });
  heartbeat_thread = std::thread([this] {
    NameThisThread("gs-agent-beat");
    HeartbeatLoop();
  });
}

StatusOr<std::unique_ptr<Agent>> Agent::Start(const AgentConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  // The addresses first, before anything starts: gRPC would listen on port 99999 as 34463,
  // and retry a malformed server address forever with a log line of its own each time.
  GS_RETURN_IF_ERROR(ParseHostPort(config.listen, "listen", /*allow_empty_host=*/true).status());
  std::vector<std::string> servers = rpc::SplitServerList(config.server);
  if (servers.empty()) return InvalidArgument("server: no address in \"" + config.server + "\"");
  for (const std::string& server : servers) {
    GS_RETURN_IF_ERROR(ParseHostPort(server, "server").status());
  }
  GS_RETURN_IF_ERROR(ResolveName(impl->config));
  GS_RETURN_IF_ERROR(impl->OpenGpus());
  GS_RETURN_IF_ERROR(impl->OpenDataDir());
  impl->FillLaunchFacts();
  impl->MakeMonitor();
  if (!config.tls_dir.empty()) {
    GS_ASSIGN_OR_RETURN(impl->tls, rpc::LoadAgentTls(config.tls_dir, impl->config.name));
  }
  GS_RETURN_IF_ERROR(impl->StartLogServer());
  impl->MakeLink(std::move(servers));
  if (Status s = impl->MakeExecutor(); !s.ok()) {
    impl->log_server->Shutdown();
    return s;
  }
  impl->StartThreads();
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { Shutdown(ShutdownMode::kKillTasks); }
const std::string& Agent::name() const { return impl_->config.name; }
const std::string& Agent::address() const { return impl_->address; }
const std::string& Agent::data_dir() const { return impl_->config.data_dir; }

void Agent::Shutdown(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->down) return;
    impl_->down = impl_->stop = true;
    impl_->work.Close();
  }
  impl_->link->Stop();
  impl_->cv.notify_all();
  impl_->link_thread.join();
  impl_->heartbeat_thread.join();
  impl_->work_thread.join();  // a launch under way ends first
  impl_->executor->Stop(mode);
  if (impl_->cgroups) impl_->cgroups->RemoveSubtreeIfEmpty();
  impl_->log_server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
}

void Agent::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->down; });
}

}  // namespace gpusched::agent
