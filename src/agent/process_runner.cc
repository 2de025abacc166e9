#include "agent/process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace gpusched::agent {
namespace {

// How often exits are checked when the kernel has no pidfd_open.
constexpr int kPollMs = 2;

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

struct ChildArgs {
  const char* program;
  char** argv;
  char** envp;
  int log_fd;
  int null_fd;
  pid_t parent;
};

// Runs in the child, on its own stack, sharing the agent's memory until execve: only system
// calls, no allocation, not instrumented.
__attribute__((no_sanitize("address", "undefined"))) int ChildMain(void* p) {
  const ChildArgs* a = static_cast<const ChildArgs*>(p);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the agent blocks SIGTERM; the task must not
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != a->parent) _exit(137);  // the agent died before prctl
  dup2(a->null_fd, 0);
  dup2(a->log_fd, 1);
  dup2(a->log_fd, 2);
  syscall(SYS_close_range, 3U, ~0U, 0U);  // no agent sockets leak into the task
  execve(a->program, a->argv, a->envp);
  static const char kMsg[] = "gpusched agent: exec failed\n";
  (void)!write(2, kMsg, sizeof kMsg - 1);
  _exit(127);
}

}  // namespace

StatusOr<std::string> ResolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), X_OK) == 0) return program;
    return NotFound("command: " + program + ": " + std::strerror(errno));
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return NotFound("command: " + program + ": not found on PATH");
}

ProcessRunner::ProcessRunner(Clock& clock, ExitCallback on_exit)
    : clock_(clock), on_exit_(std::move(on_exit)) {
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    base_env_.emplace_back(kv.substr(0, kv.find('=')), kv);
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
  thread_ = std::thread([this] { Loop(); });
}

ProcessRunner::~ProcessRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  Wake();
  thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void ProcessRunner::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

Status ProcessRunner::Launch(const LaunchSpec& spec) {
  Request r{spec, {}};
  std::future<Status> done = r.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("agent is shutting down");
    requests_.push_back(&r);
  }
  Wake();
  return done.get();
}

void ProcessRunner::Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
                         const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find({id, attempt});
  if (it == children_.end() || it->second.kill_at_ms >= 0) return;
  kill(-it->second.pid, SIGTERM);
  it->second.kill_at_ms = clock_.NowMs() + grace_ms;
  it->second.kill_reason = reason;
  Wake();  // the SIGKILL deadline shortens the thread's sleep
}

std::vector<std::pair<uint64_t, int64_t>> ProcessRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const auto& [key, child] : children_) out.push_back(key);
  return out;
}

Status ProcessRunner::Fork(const LaunchSpec& spec) {
  if (spec.command.empty()) return InvalidArgument("command: empty");
  GS_ASSIGN_OR_RETURN(std::string program, ResolveProgram(spec.command[0]));
  // Everything the child needs is prepared here: the child makes system calls only.
  std::vector<std::string> env_strings;
  env_strings.reserve(base_env_.size() + spec.env.size());
  for (const auto& [key, kv] : base_env_) {
    if (spec.env.count(key) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.command;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Internal("log: cannot open " + spec.log_path + ": " + std::strerror(errno));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ChildArgs child{program.c_str(), argv.data(), envp.data(), log_fd, null_fd, getpid()};
  // clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: fork() of an agent with many threads
  // and mappings copies page tables and cost ~30 ms of system time per task. This thread is
  // suspended until the child execs, so the child's stack and arguments stay valid.
  // Allocated once and not zeroed: filling 64 KiB per task showed in profiles.
  if (!child_stack_) child_stack_.reset(new char[kChildStackBytes]);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler may run in the shared memory
  const pid_t pid = clone(ChildMain, child_stack_.get() + kChildStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(fork_errno));
  setpgid(pid, pid);  // also from the parent, so a kill right away finds the group
  // The pid stays ours until it is reaped, so pidfd_open cannot name another process.
  int pidfd = epoll_fd_ >= 0 ? PidfdOpen(pid) : -1;
  if (pidfd >= 0) {
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = pidfd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev) != 0) {
      close(pidfd);
      pidfd = -1;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  children_[{spec.id, spec.attempt}] = Child{pid, pidfd, -1, ""};
  return Status::Ok();
}

void ProcessRunner::Reap() {
  std::vector<ProcessExit> exits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimeMs now = clock_.NowMs();
    for (auto it = children_.begin(); it != children_.end();) {
      Child& c = it->second;
      int status = 0;
      const pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == 0) {
        if (c.kill_at_ms >= 0 && now >= c.kill_at_ms) kill(-c.pid, SIGKILL);
        ++it;
        continue;
      }
      ProcessExit e{it->first.first, it->first.second, 0, ""};
      if (r < 0) {
        e.exit_code = 128;
        e.reason = "lost track of the process";
      } else if (WIFEXITED(status)) {
        e.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        e.exit_code = 128 + WTERMSIG(status);
        e.reason = "killed by signal " + std::to_string(WTERMSIG(status));
      }
      if (!c.kill_reason.empty()) e.reason = "killed: " + c.kill_reason;
      kill(-c.pid, SIGKILL);  // leftovers of the group go with the task
      if (c.pidfd >= 0) close(c.pidfd);  // also leaves the epoll set
      exits.push_back(std::move(e));
      it = children_.erase(it);
    }
  }
  for (const ProcessExit& e : exits) on_exit_(e);
}

int ProcessRunner::WaitTimeoutMs() const {
  if (epoll_fd_ < 0 || wake_fd_ < 0) return kPollMs;
  int timeout = -1;
  const TimeMs now = clock_.NowMs();
  for (const auto& [key, c] : children_) {
    int t = -1;
    if (c.pidfd < 0) t = kPollMs;
    if (c.kill_at_ms >= 0) {
      const int until = static_cast<int>(std::max<TimeMs>(0, c.kill_at_ms - now)) + 1;
      t = t < 0 ? until : std::min(t, until);
    }
    if (t >= 0) timeout = timeout < 0 ? t : std::min(timeout, t);
  }
  return timeout;
}

void ProcessRunner::Loop() {
  for (;;) {
    std::vector<Request*> batch;
    int timeout = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      if (requests_.empty()) timeout = WaitTimeoutMs();
    }
    if (timeout != 0) {
      epoll_event events[16];
      if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
        const int n = epoll_wait(epoll_fd_, events, 16, timeout);
        for (int i = 0; i < n; ++i) {
          uint64_t count = 0;
          if (events[i].data.fd == wake_fd_) (void)!read(wake_fd_, &count, sizeof count);
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      batch.swap(requests_);
    }
    for (Request* r : batch) r->done.set_value(Fork(r->spec));
    Reap();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Request* r : requests_) r->done.set_value(Unavailable("agent is shutting down"));
  for (auto& [key, c] : children_) {
    kill(-c.pid, SIGKILL);
    waitpid(c.pid, nullptr, 0);
    if (c.pidfd >= 0) close(c.pidfd);
  }
  children_.clear();
}

}  // namespace gpusched::agent
