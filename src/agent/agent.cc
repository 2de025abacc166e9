#include "agent/agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent/cluster_identity.h"
#include "agent/executor_status.h"
#include "agent/gpu_discovery.h"
#include "agent/gpu_memory_watchdog.h"
#include "agent/log_service.h"
#include "agent/noop_executor.h"
#include "agent/process_runner.h"
#include "agent/rank_launcher.h"
#include "agent/task_files.h"
#include "agent/task_cgroup.h"
#include "agent/task_user.h"
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
#include "preload/share_ledger.h"
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

// Locks: launch_mu, then write_mu, then mu (Register holds write_mu and reads `unacked`), and
// launch_mu, then the executor's (OnAssign launches under launch_mu); the executors hold none
// of their locks while they call OnExit.
//
// Threads (issue 40): the link thread reads the server's messages and hands assignments,
// kills and acks to the work thread in order (a bounded queue), so a slow account lookup or
// process launch never stops the stream (the node heartbeats the heartbeat thread queues are
// written by the link thread's completion queue) nor holds write_mu.
struct Agent::Impl {
  AgentConfig config;
  RealClock clock;
  std::unique_ptr<GpuDiscovery> gpus;
  ClusterIdentity cluster_files{""};  // DATA_DIR's, set by Start; work thread only after it
  std::string log_dir;
  DirFd log_dir_fd;  // log_dir: every task file is opened relative to it (task_files.h)
  std::string address;
  std::unique_ptr<LogService> log_service;
  std::unique_ptr<grpc::Server> log_server;
  std::vector<std::string> servers;  // config.server split; leaders named by standbys join it
  size_t current = 0;
  std::map<std::string, std::unique_ptr<v1::AgentLink::Stub>> stubs;
  std::unique_ptr<TaskExecutor> executor;
  std::shared_ptr<TaskCgroups> cgroups;  // the process executor's; null with noop
  std::string preload;  // the GPU-memory share library to inject; "" = none
  // GPU health: the heartbeat thread only.
  std::unique_ptr<core::GpuHealthTracker> health;
  core::GpuTopology topology;  // reported at registration; empty = unknown
  std::unique_ptr<MemoryWatchdog> watchdog;  // heartbeat thread only
  std::map<TaskKey, TaskShare> shares;       // guarded by mu: the GPU tasks running here
  // Guarded by mu: the most GPU memory each GPU task held on one device, as NVML showed it
  // to the watchdog: the only peak the agent measures itself (issue 36).
  std::map<TaskKey, MiB> measured_peaks;
  // Guarded by mu. GPU tasks told to stop (a kill is in its grace period), and assignments
  // that wait for them: a preemptor starts on its GPUs only once the victim has exited, so
  // the two never hold one GPU's memory at once.
  std::set<TaskKey> stopping;
  std::vector<v1::Assign> deferred;
  // Heartbeat thread only. Each task's heartbeat file is the one the agent made for it.
  ExecutorObserver observer{"/proc", [this](const TaskKey& key) {
                              return LogPath(log_dir, key.first, key.second) + ".heartbeat";
                            }};
  std::set<TaskKey> hung;                    // heartbeat thread only: logged as hung
  std::map<int, std::string> numa_cpus;  // NUMA node -> its CPUs ("0-7,16-23"), from sysfs
  size_t faults_seen = 0;       // faults of the fault file already applied
  std::string fault_file_error;  // the last parse error logged (each is logged once)

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
  std::mutex mu;  // guards everything below up to write_mu
  std::condition_variable cv;
  bool stop = false;
  bool down = false;
  grpc::ClientContext* ctx = nullptr;
  // Finished, not yet acknowledged by the server. With the process executor the journal
  // backs it: an agent restarted before the ack refills it from there (Open reports them).
  std::map<TaskKey, v1::TaskStatus> unacked;
  // Issue 39, guarded by mu. The cluster this node's task files belong to ("" = none yet,
  // DATA_DIR/cluster_id), the one a Registered named that the work thread has yet to join,
  // and the old cluster's tasks being stopped: they are left out of heartbeats and
  // registrations, and their exits are acknowledged here, never reported (the ids are the
  // old store's). `dropped_exits`: the old cluster's unreported exits, acknowledged once
  // their journal records are moved aside.
  std::string cluster_id;
  std::string joining;
  std::set<TaskKey> foreign;
  std::vector<TaskKey> dropped_exits;
  // Every message sent holds write_mu, which orders them: the link, heartbeat and executor
  // threads all send.
  std::mutex write_mu;
  // Held across a launch and its STARTED report, and by every exit report: a task that ends
  // at once is never reported finished before started. Not write_mu: heartbeats go on.
  std::mutex launch_mu;
  // Guarded by mu: the server's assignments, kills and acks for the work thread, in the
  // order received; at most kMaxQueuedAssigns assignments (more are refused, retryable).
  static constexpr size_t kMaxQueuedAssigns = 1024;
  std::deque<v1::ServerMessage> work;
  size_t queued_assigns = 0;
  std::optional<TaskKey> launching;  // guarded by mu: the assignment the work thread handles
  std::condition_variable work_cv;
  std::thread work_thread;
  struct Stream;
  Stream* stream = nullptr;  // write_mu: the connection messages go to; none while down
  std::thread link_thread, heartbeat_thread;

  // Queues `m` on the connection (dropped while there is none: the next Register carries
  // what the server must know). Never waits for the network.
  void Send(v1::AgentMessage m) {
    std::lock_guard<std::mutex> lock(write_mu);
    SendLocked(std::move(m));
  }
  void SendLocked(v1::AgentMessage m);  // REQUIRES: write_mu held
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
  void LinkLoop();
  void HeartbeatLoop();
  void Handle(const v1::ServerMessage& m);
  // Queues an assignment, kill or ack for the work thread (refuses an assignment when
  // kMaxQueuedAssigns wait). Never waits for a launch.
  void Enqueue(v1::ServerMessage m);
  void WorkLoop();
  void HandleWork(const v1::ServerMessage& m);
  // Issue 39, on the link thread: a Registered naming cluster `id`. When it is not the one
  // the files here belong to, marks what runs here as the old cluster's (MarkOldClusterLocked)
  // and queues the change for the work thread, ahead of every message of the new server.
  void NoteClusterId(const v1::ServerMessage& m);
  void MarkOldClusterLocked();  // REQUIRES: mu held
  // Issue 39, on the work thread: records `id`; first stops the old cluster's tasks and moves
  // their files aside (LeaveCluster) when another one was recorded.
  void JoinCluster(const std::string& id);
  // False when the agent stopped first (the next agent on this data dir does it again).
  bool LeaveCluster(const std::string& old_id, const std::string& id);
  // Waits until none of `keys` runs, for at most `limit_ms`; false when some still do.
  bool WaitForExits(const std::vector<TaskKey>& keys, DurationMs limit_ms);
  // An exit of the old cluster's tasks: acknowledged here, not reported. False for others.
  bool DropOldClusterExit(const TaskExit& e);
  void OnAssign(const v1::Assign& a);
  // The task being stopped that holds one of `a`'s GPUs, if any. REQUIRES: mu held.
  std::optional<TaskKey> StoppingOnGpusOf(const v1::Assign& a) const;
  // What runs here and the assignments waiting for a GPU to be freed (both are the agent's).
  std::vector<TaskKey> RunningOrWaiting();
  // Sets spec.user to the account `user` names when tasks run as their users here. Errors:
  // the account is unknown or root (permanent for the task).
  // `root_submitted`: the server proved root submitted the task (Assign.submitted_by_root).
  Status RunAs(const std::string& user, bool root_submitted, LaunchSpec& spec);
  void OnExit(const TaskExit& e);
  // Sends a task's final status and keeps it until acknowledged; after any STARTED being
  // sent (takes launch_mu).
  void Report(v1::TaskStatus st);
  // Report without launch_mu, for a task this agent never started.
  void ReportUnstarted(v1::TaskStatus st);
  void InjectPreload(LaunchSpec& spec);
  void SetEnvironment(const v1::Assign& a, LaunchSpec& spec);
  void CheckGpuHealth(v1::NodeHeartbeat* hb);
  void PinToNuma(const v1::Assign& a, LaunchSpec& spec) const;
  void WatchGpuMemory();
  struct GpuUse {
    int util = 0;  // percent
    MiB mem_mib = 0;
  };
  std::map<TaskKey, GpuUse> MeasureGpuUse();
  std::map<TaskKey, TaskObservation> ObserveExecutor();
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

static v1::TaskRef::ExecutorStatus ToProto(TaskHealth h) {
  switch (h) {
    case TaskHealth::kStopped: return v1::TaskRef::STOPPED;
    case TaskHealth::kHeartbeatStale: return v1::TaskRef::HEARTBEAT_STALE;
    case TaskHealth::kRunning: break;
  }
  return v1::TaskRef::RUNNING;
}

namespace {

// How long before `now` the reported task ended, on this node's clock alone (the server
// subtracts it from its own: no offset between the clocks enters).
int64_t EndedAgo(const v1::TaskStatus& st, TimeMs now) {
  return st.finished_ms() > 0 ? std::max<int64_t>(0, now - st.finished_ms()) : 0;
}

// The peak GPU memory the task's peak file says (LOG.peak, written by the task's preload
// library: the task's word), or 0 when there is none.
int64_t PeakFileMib(int log_dir_fd, const std::string& log) {
  std::istringstream in(ReadTaskFile(log_dir_fd, log + ".peak", 64).value_or(""));
  int64_t peak = 0;
  return in >> peak && peak > 0 ? peak : 0;
}

}  // namespace

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
    deferred.clear();  // never started: nothing to stop
  }
  const std::vector<TaskKey> stale = executor->Running();
  Log("stopping " + std::to_string(stale.size()) + " stale task copies: " + reason);
  for (const auto& [id, attempt] : stale) {
    executor->Kill(id, attempt, kill_grace_ms.load(), reason);
  }
}

// REQUIRES: write_mu held (it reads `unacked` under mu, after write_mu).
v1::AgentMessage Agent::Impl::Register() {
  StopStaleAfterPause();
  v1::AgentMessage m;
  v1::RegisterNode* r = m.mutable_register_();
  r->set_name(config.name);
  r->set_agent_instance(instance);
  r->set_address(address);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  r->set_cpu_milli(std::max(1L, cpus) * 1000);
  r->set_mem_mib(static_cast<int64_t>(pages) * page / (1 << 20));
  for (size_t i = 0; i < gpus->gpus().size(); ++i) {
    v1::Gpu* g = r->add_gpus();
    g->set_index(static_cast<int32_t>(i));
    g->set_model(gpus->gpus()[i].model);
    g->set_total_mib(gpus->gpus()[i].total_mib);
  }
  for (const auto& [k, v] : config.labels) (*r->mutable_labels())[k] = v;
  rpc::TaintsToProto(config.taints, r->mutable_taints());
  r->set_simulated(gpus->simulated());
  for (uint8_t l : topology.links) r->add_gpu_links(l);
  for (int numa : topology.numa) r->add_gpu_numa(numa);
  // Two-way reconciliation: what runs here now (adopted tasks included) and every exit the
  // server has not acknowledged. This replaces resending the unacknowledged statuses.
  for (const auto& [id, attempt] : RunningOrWaiting()) {
    v1::TaskRef* t = r->add_running();
    t->set_id(id);
    t->set_attempt(attempt);
  }
  std::lock_guard<std::mutex> lock(mu);
  r->set_cluster_id(cluster_id);
  const TimeMs now = clock.NowMs();
  for (const auto& [key, st] : unacked) {
    v1::TaskStatus* f = r->add_finished();
    *f = st;
    f->set_ended_ago_ms(EndedAgo(st, now));
  }
  return m;
}

std::vector<TaskKey> Agent::Impl::RunningOrWaiting() {
  std::vector<TaskKey> out = executor->Running();
  std::lock_guard<std::mutex> lock(mu);
  for (const v1::Assign& a : deferred) out.emplace_back(a.id(), a.attempt());
  for (const v1::ServerMessage& m : work) {  // queued for the work thread: ours too
    if (m.has_assign()) out.emplace_back(m.assign().id(), m.assign().attempt());
  }
  if (launching) out.push_back(*launching);
  std::sort(out.begin(), out.end());  // once: a launch under way may be in Running already
  out.erase(std::unique(out.begin(), out.end()), out.end());
  std::erase_if(out, [&](const TaskKey& key) { return foreign.count(key) > 0; });
  return out;
}

std::optional<TaskKey> Agent::Impl::StoppingOnGpusOf(const v1::Assign& a) const {
  for (const TaskKey& key : stopping) {
    auto share = shares.find(key);
    if (share == shares.end()) continue;
    for (int g : share->second.gpus) {
      if (std::find(a.gpus().begin(), a.gpus().end(), g) != a.gpus().end()) return key;
    }
  }
  return std::nullopt;
}

// One connection's stream on gRPC's completion-queue API. The link thread alone waits on
// its queue (reads, write completions, the final status). Any thread sends: under write_mu
// it queues the message and, when no write is in flight (one at a time on a stream), starts
// it. So no sender waits for the network or hands its write to another thread, and the
// messages leave in the order they were queued.
struct Agent::Impl::Stream {
  enum Tag : intptr_t { kRead = 1, kWrite, kFinish };
  static void* TagOf(Tag t) { return reinterpret_cast<void*>(t); }

  // Declared first, destroyed last: the call goes before its queue.
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReaderWriterInterface<v1::AgentMessage, v1::ServerMessage>>
      rw;
  std::deque<v1::AgentMessage> outbox;  // write_mu
  bool writing = false;                 // write_mu: a Write awaits its completion

  // REQUIRES: write_mu held, !writing, a message queued. Write serializes the message at
  // once, so it leaves the outbox here.
  void WriteNext() {
    writing = true;
    rw->Write(outbox.front(), TagOf(kWrite));
    outbox.pop_front();
  }
};

void Agent::Impl::SendLocked(v1::AgentMessage m) {
  if (stream == nullptr) return;
  stream->outbox.push_back(std::move(m));
  if (!stream->writing) stream->WriteNext();
}

void Agent::Impl::LinkLoop() {
  using Tag = Stream::Tag;
  DurationMs backoff = 100;
  // A server that cannot be reached, or that refuses this agent (no token, another node's), is
  // said once per server and reason, and again each minute while it lasts (the retries run
  // every second): an agent started with a wrong address or before its server does not wait
  // in silence, nor floods its log. Cleared by a registration.
  std::map<std::string, std::pair<std::string, TimeMs>> unreachable_said;
  for (;;) {
    const std::string server = servers[current];
    auto& stub = stubs[server];
    // Keepalive pings: a leader that stops answering (SIGSTOP, a partition) is left within
    // seconds, not when TCP gives up.
    if (!stub) {
      stub = v1::AgentLink::NewStub(rpc::MakeChannel(server, /*keepalive=*/true, &tls));
    }
    Stream conn;
    // The call's metadata leaves with its first message (Register), so that write need not
    // wait for a start of its own.
    conn.context.set_initial_metadata_corked(true);
    if (!config.token.empty()) conn.context.AddMetadata("authorization", "Bearer " + config.token);
    conn.rw = stub->PrepareAsyncConnect(&conn.context, &conn.cq);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      ctx = &conn.context;
    }
    conn.rw->StartCall(nullptr);  // corked: no operation, no tag
    {
      // Register is queued under write_mu like every other message (the heartbeat thread
      // and exit reports may send at any time), and the stream is published only after it,
      // in the same critical section: Register is always the stream's first message.
      std::lock_guard<std::mutex> wlock(write_mu);
      conn.outbox.push_back(Register());
      conn.WriteNext();
      stream = &conn;
    }
    v1::ServerMessage msg;
    conn.rw->Read(&msg, Stream::TagOf(Stream::kRead));
    // The operations that have not completed; the queue is shut down once none is left.
    bool reading = true, finishing = false, ended = false, connected = false;
    grpc::Status st;
    void* tag = nullptr;
    bool ok = false;
    while (conn.cq.Next(&tag, &ok)) {
      bool failed = false;
      switch (static_cast<Tag>(reinterpret_cast<intptr_t>(tag))) {
        case Stream::kRead:
          if (!ok) {
            reading = false;
            failed = true;
            break;
          }
          // Once the stream is over, what still arrives is read and dropped (Finish
          // completes only when every incoming message was read): the server reconciles
          // it with the next Register.
          if (!ended) {
            if (msg.has_registered()) {
              Log("connected to " + server);
              backoff = 100;
              unreachable_said.clear();
            }
            Handle(msg);
          }
          conn.rw->Read(&msg, Stream::TagOf(Stream::kRead));
          break;
        case Stream::kWrite: {
          std::lock_guard<std::mutex> wlock(write_mu);
          conn.writing = false;
          if (!ok) {
            failed = true;
          } else {
            connected = true;  // Register, at least, was written
            if (stream == &conn && !conn.outbox.empty()) conn.WriteNext();
          }
          break;
        }
        case Stream::kFinish:
          finishing = false;
          break;
      }
      // A read or a write failed: the stream is over. No new sends, and the status is asked
      // for once.
      if (failed && !ended) {
        ended = true;
        {
          std::lock_guard<std::mutex> wlock(write_mu);
          stream = nullptr;
        }
        finishing = true;
        conn.rw->Finish(&st, Stream::TagOf(Stream::kFinish));
      }
      // Checked after every completion, whatever it was: the last one to complete may be a
      // write that succeeded after the stream ended.
      std::lock_guard<std::mutex> wlock(write_mu);
      if (ended && !reading && !conn.writing && !finishing) break;
    }
    conn.cq.Shutdown();
    while (conn.cq.Next(&tag, &ok)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ctx = nullptr;
    }
    // Follow the leader: a standby names it; an unreachable server sends us to the next one.
    const std::string hint = rpc::LeaderHint(st.error_message());
    if (!hint.empty() && hint != server) {
      auto it = std::find(servers.begin(), servers.end(), hint);
      if (it == servers.end()) it = servers.insert(servers.end(), hint);
      current = static_cast<size_t>(it - servers.begin());
      backoff = 100;
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      Log(server + " is not the leader; following it to " + hint);
      continue;
    }
    current = (current + 1) % servers.size();
    std::unique_lock<std::mutex> lock(mu);
    if (stop) return;
    // ALREADY_EXISTS: another agent serves this node's name (issue 37).
    const bool refused = st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                         st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                         st.error_code() == grpc::StatusCode::ALREADY_EXISTS;
    if (connected && !refused && !rpc::IsNotLeader(st.error_message())) {
      Log("link to " + server + " lost: " + st.error_message());
    } else if (refused || (!connected && st.error_code() == grpc::StatusCode::UNAVAILABLE)) {
      const TimeMs now = clock.NowMs();
      auto [it, first] = unreachable_said.try_emplace(server, st.error_message(), now);
      if (first || it->second.first != st.error_message() || now - it->second.second >= 60'000) {
        // A plaintext agent to a TLS server sees the connection closed, nothing more.
        const bool maybe_tls = !tls.enabled() &&
                               st.error_message().find("Socket closed") != std::string::npos;
        Log(std::string(refused ? "refused by " : "cannot reach ") + server + ": " +
            st.error_message() + "; retrying every second" +
            (maybe_tls ? " (if the server runs with --tls-dir, start this agent with --tls-dir "
                         "too: it connects without TLS)"
                       : ""));
        it->second = {st.error_message(), now};
      }
    }
    cv.wait_for(lock, std::chrono::milliseconds(backoff), [&] { return stop; });
    if (stop) return;
    backoff = std::min<DurationMs>(backoff * 2, 1000);
  }
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
      // CN109992422A claims 5-6: the node heartbeat, with per-GPU free memory.
      v1::AgentMessage m;
      v1::NodeHeartbeat* hb = m.mutable_heartbeat();
      for (MiB f : gpus->FreeMib()) hb->add_gpu_free_mib(f);
      CheckGpuHealth(hb);
      WatchGpuMemory();
      for (const auto& [id, attempt] : running) {
        v1::TaskRef* r = hb->add_running();
        r->set_id(id);
        r->set_attempt(attempt);
      }
      Send(m);
      next_node = now + node_hb_ms.load();
    }
    if (now >= next_task && !running.empty()) {
      // CN109992422A claim 7: task heartbeats, batched per node, with the executor's status
      // (running, or hung: stopped, heartbeat file stale) and each GPU task's use of its
      // GPUs. A hung task's heartbeat says so: the server reclaims it after T_task (claim 8).
      const std::map<TaskKey, GpuUse> use = MeasureGpuUse();
      const std::map<TaskKey, TaskObservation> seen = ObserveExecutor();
      v1::AgentMessage m;
      for (const auto& [id, attempt] : running) {
        v1::TaskRef* r = m.mutable_task_heartbeats()->add_tasks();
        r->set_id(id);
        r->set_attempt(attempt);
        if (auto u = use.find({id, attempt}); u != use.end()) {
          r->set_gpu_util(u->second.util);
          r->set_gpu_mem_used_mib(u->second.mem_mib);
        }
        if (config.executor != ExecutorKind::kProcess) continue;  // no process to look at
        auto o = seen.find({id, attempt});
        const TaskHealth health = o == seen.end() ? TaskHealth::kRunning : o->second.health;
        r->set_executor_status(ToProto(health));
        if (health != TaskHealth::kRunning) r->set_executor_detail(o->second.detail);
      }
      Send(m);
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
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!m.has_assign() || queued_assigns < kMaxQueuedAssigns) {
      queued_assigns += m.has_assign() ? 1 : 0;
      work.push_back(std::move(m));
      work_cv.notify_one();
      return;
    }
  }
  v1::TaskStatus st;  // not run: the server places it again (a retryable failure)
  st.set_id(m.assign().id());
  st.set_attempt(m.assign().attempt());
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(127);
  st.set_reason("launch failed: " + std::to_string(kMaxQueuedAssigns) +
                " assignments wait for their launch on this agent");
  ReportUnstarted(st);  // not behind a launch under way: the link thread never waits
}

void Agent::Impl::WorkLoop() {
  for (;;) {
    v1::ServerMessage m;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_cv.wait(lock, [&] { return stop || !work.empty(); });
      if (stop) return;  // what is queued is the next Register's to reconcile
      m = std::move(work.front());
      work.pop_front();
      if (m.has_assign()) {
        --queued_assigns;
        launching = TaskKey{m.assign().id(), m.assign().attempt()};
      }
    }
    HandleWork(m);
    std::lock_guard<std::mutex> lock(mu);
    launching.reset();
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
      // Killed before it started (it waited for a GPU): it never runs.
      const auto waiting =
          std::find_if(deferred.begin(), deferred.end(), [&](const v1::Assign& d) {
            return d.id() == key.first && d.attempt() == key.second;
          });
      if (waiting != deferred.end()) {
        deferred.erase(waiting);
        return;
      }
      if (shares.count(key) > 0) stopping.insert(key);
    }
    executor->Kill(key.first, key.second, grace, m.kill().reason());
  } else if (m.has_registered()) {
    JoinCluster(m.registered().cluster_id());
  } else if (m.has_ack()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      unacked.erase({m.ack().id(), m.ack().attempt()});
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
  const std::string& id = m.registered().cluster_id();
  if (id.empty()) return;  // a server older than cluster ids: the files stay as they are
  if (Status valid = ValidateClusterId(id, "Registered.cluster_id"); !valid.ok()) {
    Log(valid.message() + "; the task files here stay as they are", logging::Level::kWarn);
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (id == cluster_id && joining.empty()) return;
  if (!cluster_id.empty() && id != cluster_id) MarkOldClusterLocked();
  joining = id;
  work.push_back(m);  // behind what is queued (if that is not the old cluster's: cleared)
  work_cv.notify_one();
}

// Everything here now is the old cluster's: what runs (or is being launched), what waits
// for a GPU or in the queue (assignments of the old server, never started), and the exits
// it was not told of. From now on none of it is reported to the new server.
void Agent::Impl::MarkOldClusterLocked() {
  for (const TaskKey& key : executor->Running()) foreign.insert(key);
  if (launching) foreign.insert(*launching);
  deferred.clear();
  work.clear();
  queued_assigns = 0;
  for (const auto& [key, st] : unacked) dropped_exits.push_back(key);
  unacked.clear();
}

void Agent::Impl::JoinCluster(const std::string& id) {
  std::string old;
  {
    std::lock_guard<std::mutex> lock(mu);
    old = cluster_id;
  }
  if (!old.empty() && old != id && !LeaveCluster(old, id)) return;
  if (Status s = cluster_files.Record(id); !s.ok()) {
    // Kept in memory: this agent goes on; the next one, restarted on this data dir, finds
    // the old id and moves the (new cluster's) files aside once more.
    Log("cannot record the cluster id: " + s.message(), logging::Level::kError);
  }
  std::lock_guard<std::mutex> lock(mu);
  cluster_id = id;
  if (joining == id) joining.clear();
  if (old != id) Log("the task files of this node belong to cluster " + id);
}

bool Agent::Impl::LeaveCluster(const std::string& old_id, const std::string& id) {
  const std::string reason = "this node joined cluster " + id + " (a server with a new store): "
                             "the tasks of cluster " + old_id + " are not that cluster's";
  const std::vector<TaskKey> old_tasks = executor->Running();
  {
    std::lock_guard<std::mutex> lock(mu);
    foreign.insert(old_tasks.begin(), old_tasks.end());
  }
  Log("leaving cluster " + old_id + ": stopping its " + std::to_string(old_tasks.size()) +
      " tasks; " + reason, logging::Level::kWarn);
  for (const auto& [task, attempt] : old_tasks) {
    executor->Kill(task, attempt, kill_grace_ms.load(), reason);
  }
  if (!WaitForExits(old_tasks, kill_grace_ms.load() + 5'000)) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop) return false;
    // Their exits are acknowledged when they come (DropOldClusterExit).
    Log("tasks of cluster " + old_id + " still run after their stop; moving their files now",
        logging::Level::kWarn);
  }
  auto moved = cluster_files.ArchiveTaskFiles(old_id);
  std::vector<TaskKey> dropped;
  {
    std::lock_guard<std::mutex> lock(mu);
    dropped.swap(dropped_exits);
  }
  for (const auto& [task, attempt] : dropped) executor->Acknowledge(task, attempt);
  if (!moved.ok()) {
    Log("cannot move the task files of cluster " + old_id + " aside: " + moved.status().message(),
        logging::Level::kError);
    return true;  // the new cluster's tasks still run; a log may then begin with an old one
  }
  Log("moved " + std::to_string(*moved) + " task files of cluster " + old_id + " to " +
      config.data_dir + "/clusters/" + old_id);
  return true;
}

bool Agent::Impl::WaitForExits(const std::vector<TaskKey>& keys, DurationMs limit_ms) {
  const TimeMs deadline = clock.MonoMs() + limit_ms;
  for (;;) {
    const std::vector<TaskKey> running = executor->Running();
    const bool any = std::any_of(keys.begin(), keys.end(), [&](const TaskKey& k) {
      return std::binary_search(running.begin(), running.end(), k);
    });
    if (!any) return true;
    if (clock.MonoMs() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop; })) return false;
  }
}

bool Agent::Impl::DropOldClusterExit(const TaskExit& e) {
  const TaskKey key{e.id, e.attempt};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (foreign.erase(key) == 0) return false;
    shares.erase(key);
    measured_peaks.erase(key);
    stopping.erase(key);
  }
  executor->Acknowledge(e.id, e.attempt);
  Log("task " + std::to_string(e.id) + " attempt " + std::to_string(e.attempt) +
      " of the previous cluster ended (" + (e.reason.empty() ? "exit " + std::to_string(e.exit_code) : e.reason) +
      "); not reported", logging::Level::kInfo, e.id);
  return true;
}

Status Agent::Impl::RunAs(const std::string& user, bool root_submitted, LaunchSpec& spec) {
  // An ordinary user cannot switch users: every task runs as the agent (said at start).
  if (user.empty() || !run_as_users || config.executor != ExecutorKind::kProcess) {
    return Status::Ok();
  }
  GS_ASSIGN_OR_RETURN(TaskUser u, LookUpTaskUser(user, config.name,
                                                  allow_root_tasks.load() || root_submitted));
  spec.user = std::move(u);
  return Status::Ok();
}

void Agent::Impl::OnAssign(const v1::Assign& a) {
  std::optional<v1::TaskStatus> finished;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = unacked.find({a.id(), a.attempt()});
    if (it != unacked.end()) finished = it->second;
  }
  if (finished) {  // it ran here already: say so again rather than run it twice
    v1::AgentMessage m;
    *m.mutable_status() = *finished;
    Send(m);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const std::optional<TaskKey> victim = StoppingOnGpusOf(a)) {
      const bool repeated =
          std::any_of(deferred.begin(), deferred.end(), [&](const v1::Assign& d) {
            return d.id() == a.id() && d.attempt() == a.attempt();
          });
      if (!repeated) deferred.push_back(a);
      Log("task " + std::to_string(a.id()) + " waits for task " + std::to_string(victim->first) +
          " to stop on its GPUs", logging::Level::kInfo, a.id());
      return;
    }
  }
  LaunchSpec spec;
  spec.id = a.id();
  spec.attempt = a.attempt();
  Status who = RunAs(a.user(), a.submitted_by_root(), spec);
  spec.command.assign(a.command().begin(), a.command().end());
  spec.log_path = LogPath(log_dir, a.id(), a.attempt());
  if (a.has_duration_ms()) spec.duration_ms = a.duration_ms();
  SetEnvironment(a, spec);
  spec.workdir = a.workdir();
  spec.limits.mem_mib = a.cgroup_mem_mib();
  spec.limits.cpu_milli = a.cgroup_cpu_milli();
  spec.limits.gpus.assign(a.gpus().begin(), a.gpus().end());
  spec.limits.node_gpus = static_cast<int>(gpus->gpus().size());
  std::string visible, mem;
  for (int i = 0; i < a.gpus_size(); ++i) {
    visible += (i ? "," : "") + std::to_string(a.gpus(i));
    if (i < a.gpu_mem_mib_size()) mem += (i ? "," : "") + std::to_string(a.gpu_mem_mib(i));
  }
  // Exactly the task's GPUs, numbered as NVML numbers them.
  spec.agent_env["CUDA_VISIBLE_DEVICES"] = visible;
  spec.agent_env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  spec.agent_env["GPUSCHED_GPU_MEM_MIB"] = mem;
  spec.agent_env["GPUSCHED_TASK_ID"] = std::to_string(a.id());
  spec.agent_env["GPUSCHED_ATTEMPT"] = std::to_string(a.attempt());
  // Issue 37 (Slurm's SLURM_RESTART_COUNT): the runs of the task before this one (after a
  // preemption, a checkpointed task resumes from its checkpoint when this is > 0).
  spec.agent_env["GPUSCHED_RESTART_COUNT"] = std::to_string(std::max<int64_t>(0, a.attempt() - 1));
  spec.stop_signal = a.stop_signal();
  spec.log_max_bytes = config.log_max_size_bytes;
  spec.agent_env["GPUSCHED_NODE"] = config.name;
  // The files the task writes: created by the executor next to the log (task_files.h).
  if (gpus->simulated()) spec.task_files["GPUSCHED_PEAK_MIB_FILE"] = ".peak";
  if (gpus->simulated()) spec.task_files["GPUSCHED_SIM_GPU_UTIL_FILE"] = ".gpuutil";
  if (!preload.empty() && a.gpus_size() > 0) InjectPreload(spec);
  if (a.has_heartbeat_timeout_ms()) {  // CN109992422A claim 7 (executor_status.h)
    spec.task_files[kHeartbeatFileEnv] = ".heartbeat";
    spec.agent_env[kHeartbeatTimeoutEnv] = std::to_string(a.heartbeat_timeout_ms());
  }
  if (a.gpus_size() > 0) {
    TaskShare share;
    share.gpus.assign(a.gpus().begin(), a.gpus().end());
    share.share_mib.assign(a.gpu_mem_mib().begin(), a.gpu_mem_mib().end());
    std::lock_guard<std::mutex> lock(mu);
    shares[{a.id(), a.attempt()}] = std::move(share);
  }
  PinToNuma(a, spec);
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
      v1::AgentMessage m;
      *m.mutable_status() = st;
      std::lock_guard<std::mutex> wlock(write_mu);
      std::lock_guard<std::mutex> lock(mu);  // issue 39: never a start of the old cluster's
      if (foreign.count({a.id(), a.attempt()}) == 0) SendLocked(std::move(m));
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

// Applies the faults added to the fault file since the last look and this round's health
// checks, and reports every GPU's health (the server excludes an unhealthy GPU at once).
void Agent::Impl::CheckGpuHealth(v1::NodeHeartbeat* hb) {
  const TimeMs now = clock.NowMs();
  const int count = static_cast<int>(gpus->gpus().size());
  if (!config.fault_file.empty()) {
    std::ifstream in(config.fault_file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto faults = core::ParseGpuFaults(text, count);
    if (!faults.ok()) {
      if (faults.status().message() != fault_file_error) {
        fault_file_error = faults.status().message();
        Log(config.fault_file + ": " + fault_file_error);
      }
    } else {
      if (faults->size() < faults_seen) faults_seen = faults->size();  // rewritten shorter
      for (size_t i = faults_seen; i < faults->size(); ++i) {
        Log("GPU " + std::to_string((*faults)[i].gpu) + ": " + (*faults)[i].error + " (injected)");
        health->Fault((*faults)[i], now);
      }
      faults_seen = faults->size();
    }
  }
  for (const core::GpuFault& f : gpus->PollFaults()) {
    Log("GPU " + std::to_string(f.gpu) + ": " + f.error);
    health->Fault(f, now);
  }
  const std::vector<bool> passed = gpus->CheckHealth();
  for (size_t g = 0; g < passed.size(); ++g) health->Checked(static_cast<int>(g), passed[g], now);
  for (const core::GpuHealthView& view : health->Snapshot(now)) {
    v1::GpuHealth* h = hb->add_gpu_health();
    h->set_unhealthy(!view.healthy);
    h->set_last_error(view.last_error);
  }
}

constexpr const char* kExceededShare = "exceeded its GPU memory share";

// The watchdog: what each task's processes hold per GPU (NVML), against its share.
void Agent::Impl::WatchGpuMemory() {
  std::map<TaskKey, TaskShare> tasks;
  {
    std::lock_guard<std::mutex> lock(mu);
    tasks = shares;
  }
  if (tasks.empty()) return;
  const std::vector<GpuProcessMemory> procs = gpus->ProcessMemory();
  // Processes belong to tasks by cgroup (or process group), not by what their environment
  // claims: a task that drops its id escapes nothing, one that copies another's kills nothing.
  const std::map<pid_t, TaskKey> owner = executor->TaskPids();
  std::map<TaskKey, std::map<int, MiB>> used;
  for (const GpuProcessMemory& p : procs) {
    auto it = owner.find(p.pid);
    if (it != owner.end() && tasks.count(it->second)) used[it->second][p.gpu] += p.used_mib;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [key, per_gpu] : used) {
      if (!shares.count(key)) continue;  // exited meanwhile: its report is sent
      for (const auto& [gpu, mib] : per_gpu) {
        measured_peaks[key] = std::max(measured_peaks[key], mib);
      }
    }
  }
  for (const WatchdogStop& stop : watchdog->Observe(tasks, used, clock.NowMs())) {
    Log("task " + std::to_string(stop.task.first) + " " + stop.reason, logging::Level::kWarn,
        stop.task.first);
    executor->Kill(stop.task.first, stop.task.second, kill_grace_ms.load(), stop.reason);
  }
}

// The use of each GPU task's GPUs for its task heartbeat (idle allocations). NVML: the
// highest SM utilisation of its processes' samples since the last call, and the memory they
// hold. Simulated GPUs: what the task wrote to $GPUSCHED_SIM_GPU_UTIL_FILE, "UTIL [MEM_MIB]"
// (0 % while it wrote nothing, as a task that never touches its GPU would show). None with
// the noop executor (no process), or when the driver cannot tell.
std::map<TaskKey, Agent::Impl::GpuUse> Agent::Impl::MeasureGpuUse() {
  std::map<TaskKey, GpuUse> out;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& entry : shares) out[entry.first] = {};
  }
  if (out.empty() || config.executor != ExecutorKind::kProcess) return {};
  if (gpus->simulated()) {
    for (auto& [key, use] : out) {
      std::istringstream in(
          ReadTaskFile(log_dir_fd.get(), LogFileName(key.first, key.second) + ".gpuutil", 64)
              .value_or(""));
      if (!(in >> use.util)) use.util = 0;
      if (!(in >> use.mem_mib)) use.mem_mib = 0;
      use.util = std::clamp(use.util, 0, 100);
      use.mem_mib = std::max<MiB>(use.mem_mib, 0);
    }
    return out;
  }
  const auto utils = gpus->ProcessUtilization();
  if (!utils) return {};
  const std::map<pid_t, TaskKey> owner = executor->TaskPids();  // by cgroup, not environment
  auto task_of = [&](int pid) -> std::optional<TaskKey> {
    auto it = owner.find(pid);
    return it == owner.end() ? std::nullopt : std::optional<TaskKey>(it->second);
  };
  for (const GpuProcessUtil& p : *utils) {
    if (auto key = task_of(p.pid); key && out.count(*key)) {
      out[*key].util = std::max(out[*key].util, p.sm_util);
    }
  }
  for (const GpuProcessMemory& p : gpus->ProcessMemory()) {
    if (auto key = task_of(p.pid); key && out.count(*key)) out[*key].mem_mib += p.used_mib;
  }
  return out;
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

// A task runs on the CPUs of its GPUs' NUMA node(s) (gpusched-shim applies its --cpus
// before it execs the task). Nothing is pinned when the topology or the
// node's CPU list is unknown.
void Agent::Impl::PinToNuma(const v1::Assign& a, LaunchSpec& spec) const {
  std::set<int> nodes;
  for (int g : a.gpus()) {
    const size_t gi = static_cast<size_t>(g);
    if (g < 0 || gi >= topology.numa.size() || topology.numa[gi] < 0) return;
    nodes.insert(topology.numa[gi]);
  }
  std::string cpus;
  for (int n : nodes) {
    auto it = numa_cpus.find(n);
    if (it == numa_cpus.end()) return;
    cpus += (cpus.empty() ? "" : ",") + it->second;
  }
  spec.cpus = cpus;
}

// NUMA node -> CPU list, from /sys/devices/system/node/node*/cpulist.
static std::map<int, std::string> ReadNumaCpus() {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    int node = -1;
    try {
      node = std::stoi(name.substr(4));
    } catch (const std::exception&) {  // not nodeN
      continue;
    }
    std::ifstream in(entry.path() / "cpulist");
    std::string list;
    if (std::getline(in, list) && !list.empty()) out[node] = list;
  }
  return out;
}

// The share library goes first in LD_PRELOAD, before the task's own preloads (or the
// agent's, which the task would inherit); its ledger is one file per attempt, shared by the
// task's processes. gpusched-shim sets LD_PRELOAD from its --ld-preload just before it
// execs the task, so the library never loads into the shim.
void Agent::Impl::InjectPreload(LaunchSpec& spec) {
  auto own = spec.env.find("LD_PRELOAD");
  const char* inherited = std::getenv("LD_PRELOAD");
  std::string rest = own != spec.env.end() ? own->second : (inherited ? inherited : "");
  spec.ld_preload = preload + (rest.empty() ? "" : " " + rest);
  spec.env.erase("LD_PRELOAD");
  spec.task_files["GPUSCHED_PRELOAD_STATE"] = ".gpumem";
  // The share the task cannot change (issue 35): a read-only file on a fixed descriptor; the
  // variable stays for programs that lose the descriptor (README of src/preload).
  if (auto share = spec.agent_env.find("GPUSCHED_GPU_MEM_MIB"); share != spec.agent_env.end()) {
    spec.gpu_share_mib = share->second;
  }
}

// The task's environment (LaunchSpec): its own variables as data, the reserved names
// dropped (core::IsReservedEnvName) except those the server sets itself, which it refuses
// at submission; the account's USER, LOGNAME and HOME, as login would set them (the agent's
// would name root); --tasks-per-node for the shim's argv.
void Agent::Impl::SetEnvironment(const v1::Assign& a, LaunchSpec& spec) {
  for (const auto& [k, v] : a.env()) {
    if (!core::IsReservedEnvName(k)) {
      spec.env[k] = v;
    } else if (k == kTasksPerNodeEnv) {
      spec.tasks_per_node = std::clamp(std::atoi(v.c_str()), 1, kMaxTasksPerNode);
    } else if (core::IsServerSetEnvName(k)) {
      spec.agent_env[k] = v;
    }
  }
  if (spec.user) {
    spec.agent_env["USER"] = spec.user->name;
    spec.agent_env["LOGNAME"] = spec.user->name;
    spec.agent_env["HOME"] = spec.user->home;
  }
}

// What says a task failed for GPU memory: allocations the share library refused (its
// ledger, <log>.gpumem) or an out-of-memory message of CUDA or of the library in the last
// 64 KiB of its output; and the most it held at once on one device, from the ledger.
struct MemoryEvidence {
  bool exceeded = false;
  MiB peak_mib = 0;
};
static MemoryEvidence ReadMemoryEvidence(int dir_fd, const std::string& log_name) {
  MemoryEvidence out;
  preload::LedgerLayout ledger{};
  const std::string state =
      ReadTaskFile(dir_fd, log_name + ".gpumem", sizeof ledger).value_or("");
  if (state.size() == sizeof ledger) {
    std::memcpy(&ledger, state.data(), sizeof ledger);
    out.exceeded = ledger.refused > 0;
    for (uint64_t bytes : ledger.peak_bytes) {
      out.peak_mib = std::max<MiB>(out.peak_mib, static_cast<MiB>((bytes + (1 << 20) - 1) >> 20));
    }
  }
  if (!out.exceeded) {
    const std::string text =
        ReadTaskFile(dir_fd, log_name, 64 * 1024, /*tail=*/true).value_or("");
    for (const char* marker : {"CUDA out of memory", "CUDA_ERROR_OUT_OF_MEMORY",
                               "cudaErrorMemoryAllocation", "gpusched: GPU memory share exceeded"}) {
      if (text.find(marker) != std::string::npos) out.exceeded = true;
    }
  }
  return out;
}

// The peak of the exit report, and who measured it (issue 36): the agent's own NVML samples
// (PEAK_AGENT_MEASURED), else what the task could write: $GPUSCHED_PEAK_MIB_FILE (simulated
// GPUs, where nothing observes device memory) or the preload ledger in its address space
// (PEAK_TASK_WRITTEN; the server learns from those only when told to). A report whose
// memory-failure evidence is the task's (its ledger, its output) is task-written as a whole:
// the server would learn the task's share from it. The peak file is kept until the server
// acknowledges the exit, so a re-report carries the peak.
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
    for (const auto& [key, status] : unacked) keep.insert(key);
  }
  const int removed = RemoveOldTaskFiles(
      log_dir_fd.get(), clock.NowMs() - config.task_files_retention_ms, keep);
  if (removed > 0) {
    Log("removed " + std::to_string(removed) + " files of tasks that ended more than " +
        FormatDurationMs(config.task_files_retention_ms) + " ago (task_files_retention)");
  }
}

void Agent::Impl::OnExit(const TaskExit& e) {
  if (DropOldClusterExit(e)) return;
  v1::TaskStatus st;
  st.set_id(e.id);
  st.set_attempt(e.attempt);
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(e.exit_code);
  st.set_reason(e.reason);
  // Kept with the report until acknowledged: a re-report after a reconnect says when.
  st.set_finished_ms(e.finished_ms > 0 ? e.finished_ms : clock.NowMs());
  // Only a process writes a peak file, a ledger or a log: the noop executor's tasks have
  // none to read (three opens per task saved where tasks are thousands per second).
  const bool has_files = config.executor == ExecutorKind::kProcess;
  if (e.permanent) st.set_permanent(true);  // its user cannot run it: no retry fixes that
  if (TaskCgroups::IsOutOfMemoryReason(e.reason)) st.set_out_of_memory(true);
  const std::string log = LogFileName(e.id, e.attempt);
  if (has_files) SettleLog(e.id, log);
  if (has_files) st.set_peak_gpu_mem_mib(PeakFileMib(log_dir_fd.get(), log));
  std::vector<v1::Assign> ready;  // assignments that waited for this task's GPUs
  MiB measured = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    shares.erase({e.id, e.attempt});
    if (auto it = measured_peaks.find({e.id, e.attempt}); it != measured_peaks.end()) {
      measured = it->second;
      measured_peaks.erase(it);
    }
    stopping.erase({e.id, e.attempt});
    for (auto it = deferred.begin(); it != deferred.end();) {
      if (StoppingOnGpusOf(*it)) {
        ++it;
      } else {
        ready.push_back(std::move(*it));
        it = deferred.erase(it);
      }
    }
  }
  MemoryEvidence memory =
      has_files ? ReadMemoryEvidence(log_dir_fd.get(), log) : MemoryEvidence{};
  const bool task_says_exceeded = memory.exceeded;
  if (e.reason.find(kExceededShare) != std::string::npos) memory.exceeded = true;  // watchdog
  if (st.peak_gpu_mem_mib() == 0 && memory.peak_mib > 0) st.set_peak_gpu_mem_mib(memory.peak_mib);
  if (e.exit_code != 0 && memory.exceeded) st.set_gpu_mem_exceeded(true);
  if (st.peak_gpu_mem_mib() > 0 || st.gpu_mem_exceeded()) {
    st.set_peak_source(v1::TaskStatus::PEAK_TASK_WRITTEN);
  }
  if (measured > 0 && !(st.gpu_mem_exceeded() && task_says_exceeded)) {
    st.set_peak_gpu_mem_mib(measured);
    st.set_peak_source(v1::TaskStatus::PEAK_AGENT_MEASURED);
  }
  Report(st);
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

// Under write_mu throughout, so a Register being written either carries the status in
// `finished` or precedes the status message: never both, never neither.
void Agent::Impl::ReportUnstarted(v1::TaskStatus st) {
  std::lock_guard<std::mutex> wlock(write_mu);
  {
    std::lock_guard<std::mutex> lock(mu);
    // Issue 39: a launch of the old cluster's that failed: no new server hears of it.
    if (foreign.erase({st.id(), st.attempt()}) > 0) return;
    unacked[{st.id(), st.attempt()}] = st;
  }
  st.set_ended_ago_ms(EndedAgo(st, clock.NowMs()));
  v1::AgentMessage m;
  *m.mutable_status() = std::move(st);
  SendLocked(std::move(m));
}

// ---------------------------------------------------------------- Agent

StatusOr<std::unique_ptr<Agent>> Agent::Start(const AgentConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  // The addresses first, before anything starts: gRPC would listen on port 99999 as 34463,
  // and retry a malformed server address forever with a log line of its own each time.
  GS_RETURN_IF_ERROR(ParseHostPort(config.listen, "listen", /*allow_empty_host=*/true).status());
  impl->servers = rpc::SplitServerList(config.server);
  if (impl->servers.empty()) {
    return InvalidArgument("server: no address in \"" + config.server + "\"");
  }
  for (const std::string& server : impl->servers) {
    GS_RETURN_IF_ERROR(ParseHostPort(server, "server").status());
  }
  // The server checks the same at registration; with TLS, the certificate's name rule too
  // (certs init refuses what no certificate file can be named).
  if (impl->config.name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    impl->config.name = host;
    if (Status s = rpc::CheckNodeName(impl->config.name, "name"); !s.ok()) {
      return InvalidArgument(s.message() + " (this machine's host name: give --name)");
    }
  } else {
    GS_RETURN_IF_ERROR(rpc::CheckNodeName(impl->config.name, "name"));
  }
  if (!config.simulate) {
    auto nvml = OpenNvml();
    if (nvml.ok() && !(*nvml)->gpus().empty()) impl->gpus = std::move(nvml).value();
  }
  if (!impl->gpus) {
    GS_ASSIGN_OR_RETURN(std::vector<GpuInfo> sim, ParseGpuList(config.gpus));
    impl->gpus = MakeSimulatedGpus(std::move(sim));
  }
  GS_ASSIGN_OR_RETURN(impl->preload, FindPreload(config));
  if (config.gpu_health_period_ms < 0) {
    return InvalidArgument("gpu-health-period: must be >= 0, got " +
                           std::to_string(config.gpu_health_period_ms) + " ms");
  }
  if (!config.topology.empty()) {
    GS_ASSIGN_OR_RETURN(impl->topology,
                        core::SimulatedTopology(config.topology,
                                                static_cast<int>(impl->gpus->gpus().size())));
  } else {
    impl->topology = impl->gpus->Topology();
  }
  impl->numa_cpus = ReadNumaCpus();
  impl->watchdog = std::make_unique<MemoryWatchdog>(config.gpu_memory_grace_ms);
  impl->health = std::make_unique<core::GpuHealthTracker>(
      static_cast<int>(impl->gpus->gpus().size()), config.gpu_health_period_ms);
  if (impl->preload.empty() && config.preload_path != "none") {
    impl->Log("libgpusched_preload.so is not next to this executable: GPU memory shares of "
              "tasks are not enforced (only the watchdog, where NVML is)");
  }
  if (impl->config.data_dir.empty()) {
    // Named after the agent, not the process: the next agent of that name adopts its tasks.
    // Never in /tmp, where another user could create the name first (issue 35).
    impl->config.data_dir = DefaultStateDir("agent-" + impl->config.name);
  }
  // Everything the agent trusts lives here: only its user may own or write it.
  GS_RETURN_IF_ERROR(EnsurePrivateDir(impl->config.data_dir, "data-dir"));
  std::error_code ec;
  // Absolute, so the paths handed to the shims and shown in errors do not depend on the
  // working directory.
  const std::filesystem::path absolute = std::filesystem::absolute(impl->config.data_dir, ec);
  if (!ec) impl->config.data_dir = absolute.lexically_normal().string();
  impl->log_dir = impl->config.data_dir + "/logs";
  {
    char host[256] = {};
    (void)gethostname(host, sizeof(host) - 1);
    impl->instance = std::string(host) + "/" + std::to_string(getpid()) + "/" +
                     std::to_string(impl->clock.NowNs());
  }
  std::filesystem::create_directories(impl->log_dir, ec);
  if (ec) return InvalidArgument("data-dir: cannot create " + impl->log_dir + ": " + ec.message());
  GS_ASSIGN_OR_RETURN(impl->log_dir_fd, OpenDirectory(impl->log_dir));
  impl->cluster_files = ClusterIdentity(impl->config.data_dir);
  GS_ASSIGN_OR_RETURN(impl->cluster_id, impl->cluster_files.Read());

  if (!config.tls_dir.empty()) {
    GS_ASSIGN_OR_RETURN(impl->tls, rpc::LoadAgentTls(config.tls_dir, impl->config.name));
  }
  // With TLS the log service is mutual TLS too, answering the servers only (log_service.h).
  // Without TLS it answers only reads the server signed (issue 35, rpc/log_capability.h).
  impl->log_service = std::make_unique<LogService>(impl->log_dir, impl->tls.enabled(),
                                                   &impl->log_read_key, &impl->clock);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (impl->tls.enabled()) {
    grpc::SslServerCredentialsOptions o(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    o.pem_root_certs = impl->tls.ca_pem;
    o.pem_key_cert_pairs.push_back({impl->tls.key_pem, impl->tls.cert_pem});
    credentials = grpc::SslServerCredentials(o);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, credentials, &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // refuse a port in use
  builder.RegisterService(impl->log_service.get());
  std::string bind_failure;  // gRPC's reason for a port it could not bind, for our message
  {
    rpc::GrpcLogCapture bind_log;  // this call only
    impl->log_server = builder.BuildAndStart();
    if (!impl->log_server || port == 0) {
      bind_failure = rpc::ListenFailureReason(bind_log);
    } else {
      bind_log.Replay();
    }
  }
  if (!bind_failure.empty()) {
    return FailedPrecondition("listen: cannot listen on " + config.listen + ": " + bind_failure);
  }
  impl->address = config.listen.substr(0, config.listen.rfind(':')) + ":" + std::to_string(port);
  Impl* raw = impl.get();
  auto on_exit = [raw](const TaskExit& e) { raw->OnExit(e); };
  if (config.executor == ExecutorKind::kNoop) {
    impl->executor = std::make_unique<NoopExecutor>(impl->clock, on_exit);
  } else {
    // Adopts the tasks a previous agent left running here and reports (into `unacked`,
    // before the link starts) the exits it left unacknowledged.
    ProcessRunnerOptions o;
    o.journal_dir = impl->config.data_dir + "/journal";
    o.shim_path = config.shim_path;
    // Each task in a cgroup of its own; what cannot be enforced here is said once.
    impl->cgroups = std::make_shared<TaskCgroups>(
        DetectCgroupLayout(*MakeRealCgroupOps()),
        CgroupSubtreeName(impl->config.name, impl->config.data_dir), MakeRealCgroupOps());
    impl->cgroups->Init();
    impl->Log(impl->cgroups->Describe());
    o.cgroups = impl->cgroups;
    auto runner = ProcessRunner::Open(impl->clock, o, on_exit);
    if (!runner.ok()) {
      impl->log_server->Shutdown();
      return runner.status();
    }
    impl->executor = std::move(runner).value();
  }
  impl->run_as_users = !config.run_as_self && CanRunTasksAsOtherUsers();
  if (config.run_as_self && config.executor == ExecutorKind::kProcess) {
    impl->Log("--run-as-self: every task runs as " + DescribeOwnUser() +
              ", whoever submitted it");
  } else if (!impl->run_as_users && config.executor == ExecutorKind::kProcess) {
    impl->Log("running as " + DescribeOwnUser() + ", not root: every task runs as this user, "
              "whoever submitted it");
  }
  if (config.wrap_executor) impl->executor = config.wrap_executor(std::move(impl->executor));
  impl->work_thread = std::thread([raw] {
    NameThisThread("gs-agent-work");
    raw->WorkLoop();
  });
  impl->link_thread = std::thread([raw] {
    NameThisThread("gs-agent-link");
    raw->LinkLoop();
  });
  impl->heartbeat_thread = std::thread([raw] {
    NameThisThread("gs-agent-beat");
    raw->HeartbeatLoop();
  });
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
    if (impl_->ctx != nullptr) impl_->ctx->TryCancel();
  }
  impl_->cv.notify_all();
  impl_->work_cv.notify_all();
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
