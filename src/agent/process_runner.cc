#include "agent/process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gpusched::agent {
namespace {

// How often exits and kill deadlines are checked while children run.
constexpr int kPollMs = 2;

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
  thread_ = std::thread([this] { Loop(); });
}

ProcessRunner::~ProcessRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status ProcessRunner::Launch(const LaunchSpec& spec) {
  Request r{spec, {}};
  std::future<Status> done = r.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("agent is shutting down");
    requests_.push_back(&r);
  }
  cv_.notify_all();
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
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
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
  std::vector<char> stack(64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler may run in the shared memory
  const pid_t pid = clone(ChildMain, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD,
                          &child);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(fork_errno));
  setpgid(pid, pid);  // also from the parent, so a kill right away finds the group
  std::lock_guard<std::mutex> lock(mu_);
  children_[{spec.id, spec.attempt}] = Child{pid, -1, ""};
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
      exits.push_back(std::move(e));
      it = children_.erase(it);
    }
  }
  for (const ProcessExit& e : exits) on_exit_(e);
}

void ProcessRunner::Loop() {
  for (;;) {
    std::vector<Request*> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] { return stop_ || !requests_.empty(); };
      if (children_.empty()) {
        cv_.wait(lock, ready);
      } else {
        cv_.wait_for(lock, std::chrono::milliseconds(kPollMs), ready);
      }
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
  }
  children_.clear();
}

}  // namespace gpusched::agent
