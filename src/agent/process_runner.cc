#include "agent/process_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpusched::agent {
namespace {

// How often exits are checked when the kernel has no pidfd_open.
constexpr int kPollMs = 2;
// How long Stop(kKillTasks) waits for the shims to record their tasks' exits. A task stuck
// in the kernel (uninterruptible sleep) may outlive SIGKILL; the agent stops anyway.
constexpr int kStopWaitMs = 10'000;
constexpr char kLostReason[] = "the task's supervisor died";

// The descriptor is close-on-exec: pidfd_open always sets it.
int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

int PidfdSendSignal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

// True when `id` still names a live process.
bool Alive(const journal::ProcessId& id) {
  journal::ProcessId now;
  return journal::ReadProcessId(id.pid, &now) && journal::SameProcess(now, id);
}

// What a shim wrote on its status socket (one line), "" when nothing.
std::string ReadStatusPipe(int fd) {
  if (fd < 0) return "";
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  // A start request the agent did not answer in time (shim_confirm.h) is not part of a line.
  std::erase(s, kConfirmRequest);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The program the shim is to run. A task that runs as the agent's own user is checked here,
// so a missing workdir or command fails the launch at once (the agent can see no more than
// the task could). A task of another user is checked by the shim after it has become that
// user (issue 35: never as root), and its failure comes with its exit.
StatusOr<std::string> CheckAsAgent(const LaunchSpec& spec) {
  if (spec.user) return spec.command[0];
  std::error_code ec;
  if (!spec.workdir.empty() && !std::filesystem::is_directory(spec.workdir, ec)) {
    return NotFound("workdir: " + spec.workdir + ": no such directory on this node");
  }
  const bool relative = spec.command[0].find('/') != std::string::npos &&
                        spec.command[0][0] != '/' && !spec.workdir.empty();
  return ResolveProgram(relative ? spec.workdir + "/" + spec.command[0] : spec.command[0]);
}

}  // namespace

StatusOr<std::unique_ptr<ProcessRunner>> ProcessRunner::Open(Clock& clock,
                                                              const ProcessRunnerOptions& options,
                                                              ExitCallback on_exit) {
  const std::string shim = options.shim_path.empty() ? DefaultShimPath() : options.shim_path;
  if (access(shim.c_str(), X_OK) != 0) {
    return FailedPrecondition("executor: the task supervisor " + shim + " cannot be run (" +
                              std::strerror(errno) +
                              "); it is built with gpusched and must sit next to the gpusched "
                              "binary");
  }
  if (options.journal_dir.empty()) return InvalidArgument("journal_dir: empty");
  GS_ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal, Journal::Open(options.journal_dir));
  auto runner = std::unique_ptr<ProcessRunner>(
      new ProcessRunner(clock, std::move(journal), shim,
                        options.cgroups && options.cgroups->enabled() ? options.cgroups : nullptr,
                        std::move(on_exit)));
  GS_ASSIGN_OR_RETURN(std::vector<TaskExit> exits, runner->Recover());
  for (const TaskExit& e : exits) runner->on_exit_(e);
  ProcessRunner* raw = runner.get();
  runner->thread_ = std::thread([raw] { raw->Loop(); });
  return runner;
}

ProcessRunner::ProcessRunner(Clock& clock, std::unique_ptr<Journal> journal,
                             std::string shim_path, std::shared_ptr<TaskCgroups> cgroups,
                             ExitCallback on_exit)
    : clock_(clock),
      journal_(std::move(journal)),
      spawner_(std::move(shim_path)),
      cgroups_(std::move(cgroups)),
      on_exit_(std::move(on_exit)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
}

ProcessRunner::~ProcessRunner() {
  Stop(ShutdownMode::kKillTasks);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

StatusOr<std::vector<TaskExit>> ProcessRunner::Recover() {
  GS_ASSIGN_OR_RETURN(auto entries, journal_->List());
  std::vector<TaskExit> exits;
  for (const auto& [key, entry] : entries) {
    if (!entry.exit) {
      StatusOr<journal::RunRecord> run = journal_->ReadRun(key);
      if (run.ok() && Alive(run->shim)) {
        Shim shim;
        shim.pid = run->shim.pid;
        shim.identity = run->shim;
        shim.pidfd = PidfdOpen(shim.pid);
        // The pid may have been reused between the check and pidfd_open; the pidfd pins
        // whichever process it names, so checking again settles it.
        if ((shim.pidfd >= 0 || errno == ENOSYS) && Alive(run->shim)) {
          std::lock_guard<std::mutex> lock(mu_);
          Watch(key, shim);
          continue;
        }
        if (shim.pidfd >= 0) close(shim.pidfd);
      }
    }
    // The shim is gone: it recorded the exit (perhaps since the listing), or it died.
    StatusOr<TaskExit> e = journal_->ReadExit(key);
    if (e.ok()) EndCgroup(key, &*e, false);
    exits.push_back(e.ok() ? *e
                           : Lost(key, e.status().code() == StatusCode::kNotFound
                                           ? kLostReason
                                           : e.status().message()));
  }
  return exits;
}

TaskExit ProcessRunner::Lost(const TaskKey& key, const std::string& reason) {
  // What is left of the task runs on unsupervised: kill its group if its leader is still
  // the process the shim recorded (same boot, pid and start time), never a reused pid.
  StatusOr<journal::RunRecord> run = journal_->ReadRun(key);
  if (run.ok()) {
    journal::ProcessId leader;
    if (journal::ReadProcessId(run->task_pgid, &leader) &&
        leader.start_ticks == run->task_start_ticks &&
        std::strcmp(leader.boot_id, run->shim.boot_id) == 0) {
      kill(-run->task_pgid, SIGKILL);
    }
  }
  if (cgroups_) cgroups_->Remove(key);  // and whatever left the group
  // Not journaled: until it is acknowledged, the next agent reaches the same verdict from
  // the same .run record.
  return TaskExit{key.first, key.second, -1, reason};
}

void ProcessRunner::Watch(const TaskKey& key, Shim shim) {
  if (shim.pidfd >= 0 && epoll_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = shim.pidfd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, shim.pidfd, &ev) != 0) {
      close(shim.pidfd);
      shim.pidfd = -1;
    }
  } else if (shim.pidfd >= 0) {
    close(shim.pidfd);
    shim.pidfd = -1;
  }
  shims_[key] = std::move(shim);
}

void ProcessRunner::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

Status ProcessRunner::Launch(const LaunchSpec& spec) {
  if (spec.command.empty()) return InvalidArgument("command: empty");
  GS_ASSIGN_OR_RETURN(std::string program, CheckAsAgent(spec));
  const TaskKey key{spec.id, spec.attempt};
  // spawn_mu_ is held throughout: the check and the insertion are one step for concurrent
  // launches of the same task, the spawner is used by one thread at a time, and Stop waits
  // for a launch under way.
  std::lock_guard<std::mutex> spawn_lock(spawn_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("agent is shutting down");
    if (shims_.count(key) != 0) {
      return AlreadyExists("task " + std::to_string(spec.id) + " attempt " +
                           std::to_string(spec.attempt) + " is already running");
    }
  }
  std::vector<int> cgroup_fds;
  if (cgroups_) {
    GS_ASSIGN_OR_RETURN(cgroup_fds, cgroups_->Create(key, spec.limits));
  }
  StatusOr<SpawnedShim> started = spawner_.Spawn(spec, program, journal_->dir(), cgroup_fds);
  for (int fd : cgroup_fds) close(fd);
  if (!started.ok()) {
    if (cgroups_) cgroups_->Remove(key);
    return started.status();
  }
  const SpawnedShim spawned = *started;
  Shim shim;
  shim.pid = spawned.pid;
  shim.own_child = true;
  shim.status_fd = spawned.status_fd;
  // The pid stays ours until it is reaped, so pidfd_open cannot name another process.
  shim.pidfd = epoll_fd_ >= 0 ? PidfdOpen(shim.pid) : -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The thread answers the shim's start request (shim_confirm.h) once its run record is
    // on disk; the launch does not wait for it.
    if (epoll_fd_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = shim.status_fd;
      (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, shim.status_fd, &ev);  // else polled
    }
    confirming_.insert(key);
    Watch(key, std::move(shim));
  }
  Wake();  // a shim without pidfd shortens the thread's sleep
  return Status::Ok();
}

void ProcessRunner::Signal(const Shim& shim, int sig) {
  if (shim.own_child) {
    kill(shim.pid, sig);  // our child: its pid cannot be reused before we reap it
    return;
  }
  if (shim.pidfd >= 0 && PidfdSendSignal(shim.pidfd, sig) == 0) return;
  // No pidfd: checked first, a small race with pid reuse remains.
  if (Alive(shim.identity)) kill(shim.pid, sig);
}

void ProcessRunner::Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
                         const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shims_.find({id, attempt});
  if (it == shims_.end() || it->second.kill_at_ms >= 0) return;
  Signal(it->second, SIGTERM);  // the shim forwards it to the task's group
  it->second.kill_at_ms = clock_.NowMs() + grace_ms;
  it->second.kill_reason = reason;
  Wake();  // the SIGKILL deadline shortens the thread's sleep
}

std::vector<TaskKey> ProcessRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskKey> out = KeysOf(shims_);
  out.insert(out.end(), settling_.begin(), settling_.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<TaskKey, TaskProcess> ProcessRunner::Processes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<TaskKey, TaskProcess> out;
  for (auto& [key, s] : shims_) {
    if (s.process.pgid == 0 && journal_) {
      StatusOr<journal::RunRecord> run = journal_->ReadRun(key);
      if (run.ok() && run->task_pgid > 0) s.process = {run->task_pgid, run->started_ms};
    }
    if (s.process.pgid > 0) out[key] = s.process;
  }
  return out;
}

std::map<pid_t, TaskKey> ProcessRunner::TaskPids() {
  if (!cgroups_) {
    std::map<pid_t, TaskKey> pgids;
    for (const auto& [key, p] : Processes()) pgids[p.pgid] = key;
    return PidsByProcessGroup(pgids);
  }
  std::map<pid_t, TaskKey> out;
  for (const TaskKey& key : Running()) {
    for (pid_t pid : cgroups_->Pids(key)) out[pid] = key;
  }
  return out;
}

void ProcessRunner::EndCgroup(const TaskKey& key, TaskExit* e, bool killed_by_agent) {
  if (!cgroups_) return;
  if (e->exit_code == 128 + SIGKILL && !killed_by_agent) {
    const std::string oom = cgroups_->OutOfMemoryReason(key);
    if (!oom.empty() && e->reason != oom) {
      e->reason = oom;
      (void)journal_->WriteExit(*e, e->finished_ms > 0 ? e->finished_ms : clock_.NowMs());
    }
  }
  cgroups_->Remove(key);
}

void ProcessRunner::Acknowledge(uint64_t id, int64_t attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || shims_.count({id, attempt}) != 0) return;
  journal_->Remove({id, attempt});
}

bool ProcessRunner::Exited(Shim& shim, int* wait_status) {
  *wait_status = -1;
  if (shim.own_child) {
    int status = 0;
    const pid_t r = waitpid(shim.pid, &status, WNOHANG);
    if (r == 0) return false;
    if (r == shim.pid) *wait_status = status;
    return true;  // r < 0: reaped elsewhere; the journal says how it ended
  }
  if (shim.pidfd >= 0) {
    pollfd p{shim.pidfd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  return !Alive(shim.identity);
}

TaskExit ProcessRunner::Settle(const TaskKey& key, const Shim& shim, int wait_status) {
  StatusOr<TaskExit> recorded = journal_->ReadExit(key);
  if (recorded.ok()) {
    TaskExit e = *recorded;
    if (!shim.kill_reason.empty()) {
      e.reason = "killed: " + shim.kill_reason;
      (void)journal_->WriteExit(e, clock_.NowMs());  // a re-report says the same
    }
    EndCgroup(key, &e, !shim.kill_reason.empty());
    return e;
  }
  const std::string said = ReadStatusPipe(shim.status_fd);
  if (recorded.status().code() == StatusCode::kNotFound && !said.empty() &&
      wait_status != -1 && WIFEXITED(wait_status)) {
    // The shim could not journal (its .run or its .exit) and said why.
    if (cgroups_) cgroups_->Remove(key);
    return TaskExit{key.first, key.second, WEXITSTATUS(wait_status), said};
  }
  return Lost(key, recorded.status().code() == StatusCode::kNotFound
                       ? kLostReason
                       : recorded.status().message());
}

std::vector<TaskExit> ProcessRunner::Reap() {
  struct Done {
    TaskKey key;
    Shim shim;
    int wait_status;
  };
  std::vector<Done> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimeMs now = clock_.NowMs();
    for (auto it = shims_.begin(); it != shims_.end();) {
      Shim& s = it->second;
      int wait_status = -1;
      if (!Exited(s, &wait_status)) {
        if (s.kill_at_ms >= 0 && now >= s.kill_at_ms && !s.killed_hard) {
          Signal(s, SIGUSR1);  // the shim sends SIGKILL to the task's group
          s.killed_hard = true;
        }
        ++it;
        continue;
      }
      confirming_.erase(it->first);  // before its socket closes (the number is reused)
      settling_.insert(it->first);    // until on_exit_ returns (Running)
      done.push_back({it->first, std::move(s), wait_status});
      it = shims_.erase(it);
    }
  }
  std::vector<TaskExit> exits;
  for (Done& d : done) {
    exits.push_back(Settle(d.key, d.shim, d.wait_status));
    if (d.shim.pidfd >= 0) close(d.shim.pidfd);  // also leaves the epoll set
    if (d.shim.status_fd >= 0) close(d.shim.status_fd);
  }
  return exits;
}

void ProcessRunner::AnswerStartRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = confirming_.begin(); it != confirming_.end();) {
    const int fd = shims_.at(*it).status_fd;
    if (AnswerConfirmRequest(fd) == ConfirmOutcome::kNotYet) {
      ++it;
      continue;
    }
    if (epoll_fd_ >= 0) (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    it = confirming_.erase(it);
  }
}

int PollTimeoutUntil(TimeMs deadline_ms, TimeMs now_ms) {
  constexpr TimeMs kMaxWaitMs = 86'400'000;  // a day: far below INT_MAX ms (24.8 days)
  return static_cast<int>(std::clamp<TimeMs>(deadline_ms - now_ms, 0, kMaxWaitMs)) + 1;
}

int ProcessRunner::WaitTimeoutMs() const {
  if (epoll_fd_ < 0 || wake_fd_ < 0) return kPollMs;
  int timeout = -1;
  const TimeMs now = clock_.NowMs();
  for (const auto& [key, s] : shims_) {
    int t = -1;
    if (s.pidfd < 0) t = kPollMs;
    if (s.kill_at_ms >= 0 && !s.killed_hard) {
      const int until = PollTimeoutUntil(s.kill_at_ms, now);
      t = t < 0 ? until : std::min(t, until);
    }
    if (t >= 0) timeout = timeout < 0 ? t : std::min(timeout, t);
  }
  return timeout;
}

void ProcessRunner::Loop() {
  for (;;) {
    int timeout = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      timeout = WaitTimeoutMs();
    }
    if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
      epoll_event events[16];
      const int n = epoll_wait(epoll_fd_, events, 16, timeout);
      for (int i = 0; i < n; ++i) {
        uint64_t count = 0;
        if (events[i].data.fd == wake_fd_) (void)!read(wake_fd_, &count, sizeof count);
      }
    } else {
      poll(nullptr, 0, kPollMs);
    }
    AnswerStartRequests();
    for (const TaskExit& e : Reap()) {
      on_exit_(e);
      std::lock_guard<std::mutex> lock(mu_);
      settling_.erase({e.id, e.attempt});
    }
  }
}

void ProcessRunner::Stop(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> spawn_lock(spawn_mu_);  // no launch is half done
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  std::map<TaskKey, Shim> shims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shims.swap(shims_);
    confirming_.clear();
  }
  if (mode == ShutdownMode::kKillTasks) {
    for (auto& [key, s] : shims) Signal(s, SIGUSR1);
    // Each shim records its task's exit, then exits; wait for that, within a bound.
    for (int waited = 0; waited < kStopWaitMs; waited += kPollMs) {
      bool all_gone = true;
      for (auto& [key, s] : shims) {
        int wait_status = -1;
        if (s.pid > 0 && Exited(s, &wait_status)) s.pid = 0;
        all_gone = all_gone && s.pid == 0;
      }
      if (all_gone) break;
      poll(nullptr, 0, kPollMs);
    }
    // Their exits stay in the journal for the next agent; their cgroups need not wait.
    if (cgroups_) {
      for (const auto& [key, s] : shims) cgroups_->Remove(key);
    }
  }
  // kLeaveTasks: the shims run on; this agent's children among them are reparented when
  // the process exits (in a process that goes on, they are left as zombies once they end).
  for (auto& [key, s] : shims) {
    if (s.pidfd >= 0) close(s.pidfd);
    if (s.status_fd >= 0) close(s.status_fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  journal_.reset();  // releases the journal's lock for the next agent
}

}  // namespace gpusched::agent
