#include "agent/shim_spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "agent/task_credentials.h"
#include "agent/task_files.h"
#include "core/reserved_env.h"
#include "agent/task_share_file.h"
#include "preload/share_file.h"

extern char** environ;

namespace gpusched::agent {
namespace {

struct ChildArgs {
  const char* shim;
  char** argv;
  char** envp;
  int log_fd;
  int null_fd;
  int status_fd;
  int share_fd;  // -1 = none; else numbered 10 or above (task_share_file.h)
  const sigset_t* shim_mask;
  int exec_errno;         // written by the child when execve fails
  const int* cgroup_fds;  // cgroup.procs files the child joins (task_cgroup.h)
  size_t cgroup_fd_count;
  int cgroup_errno;       // written by the child when it cannot join one
};

// Runs in the child, on its own stack, sharing the agent's memory until execve: only system
// calls, no allocation, not instrumented. No parent-death signal: the shim must outlive the
// agent.
__attribute__((no_sanitize("address", "undefined", "thread"))) int ChildMain(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  // The signals the shim waits for stay blocked until it waits for them (and job control
  // cannot stop it before it leaves the agent's session); the agent's own mask is not the
  // task's. setsid is left to the shim: it can take milliseconds (a new scheduler autogroup)
  // and this thread blocks the agent's until execve.
  sigprocmask(SIG_SETMASK, a->shim_mask, nullptr);
  // Into the task's cgroup first (its descriptors may be any number, 0-3 included): the shim
  // and all the task forks are in it from the start.
  for (size_t i = 0; i < a->cgroup_fd_count; ++i) {
    if (write(a->cgroup_fds[i], "0", 1) != 1) {
      a->cgroup_errno = errno;
      _exit(127);
    }
  }
  dup2(a->null_fd, 0);
  dup2(a->log_fd, 1);
  dup2(a->log_fd, 2);
  if (a->status_fd == 3) {
    fcntl(3, F_SETFD, 0);
  } else {
    dup2(a->status_fd, 3);
  }
  // The share file goes to the shim and the task on a fixed descriptor, left open across
  // exec (dup2 clears close-on-exec): the preload library reads it (preload/share_file.h).
  unsigned first_closed = preload::kShareFd;
  if (a->share_fd >= 0 && dup2(a->share_fd, preload::kShareFd) == preload::kShareFd) {
    first_closed = preload::kShareFd + 1;
  }
  syscall(SYS_close_range, first_closed, ~0U, 0U);  // no agent sockets leak into the shim or task
  execve(a->shim, a->argv, a->envp);
  a->exec_errno = errno;
  _exit(127);
}

#if defined(__SANITIZE_THREAD__)
#define GPUSCHED_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPUSCHED_UNDER_TSAN 1
#endif
#endif

#ifdef GPUSCHED_UNDER_TSAN
// glibc's own name for clone(): the same function, which ThreadSanitizer does not intercept.
extern "C" int __clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);
#endif

// clone(CLONE_VM | CLONE_VFORK) of ChildMain. Under ThreadSanitizer, past its interceptor:
// TSan treats every cloned child as a forked one and marks, from the child, its runtime as
// "after a multi-threaded fork"; with CLONE_VM that runtime is the agent's own, which then
// dies at its next thread start ("starting new threads after multi-threaded fork is not
// supported"). The agent's thread is suspended until execve, so the child runs in its stead.
pid_t CloneShim(ChildArgs* child, char* stack_top) {
#ifdef GPUSCHED_UNDER_TSAN
  return __clone(ChildMain, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, child);
#else
  return clone(ChildMain, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, child);
#endif
}

// The task's environment: the agent's and then the task's own variables without the reserved
// names (whoever set them: the agent's token and server address never reach a task, and a
// task cannot set what the product decides), then the values the agent sets, then the paths
// of the files it created for the task.
std::vector<std::string> TaskEnvironment(
    const std::vector<std::pair<std::string, std::string>>& base, const LaunchSpec& spec,
    const std::map<std::string, std::string>& file_paths) {
  auto overridden = [&](const std::string& key) {
    return spec.env.count(key) != 0 || spec.agent_env.count(key) != 0 ||
           file_paths.count(key) != 0;
  };
  std::vector<std::string> out;
  out.reserve(base.size() + spec.env.size() + spec.agent_env.size() + file_paths.size());
  for (const auto& [key, kv] : base) {
    if (!overridden(key)) out.push_back(kv);  // base holds no reserved name
  }
  for (const auto& [k, v] : spec.env) {
    if (!core::IsReservedEnvName(k) && spec.agent_env.count(k) == 0 && file_paths.count(k) == 0) {
      out.push_back(k + "=" + v);
    }
  }
  for (const auto& [k, v] : spec.agent_env) {
    if (file_paths.count(k) == 0) out.push_back(k + "=" + v);
  }
  for (const auto& [k, v] : file_paths) out.push_back(k + "=" + v);
  return out;
}

// The shim's leading options (shim_main.cc): what it applies, from the agent only.
StatusOr<std::vector<std::string>> ShimOptions(const LaunchSpec& spec) {
  std::vector<std::string> out{"--confirm=1"};  // always: the executor answers
  if (spec.user) {
    TaskCredentials creds;
    creds.uid = spec.user->uid;
    creds.gid = spec.user->gid;
    if (spec.user->groups.size() > kMaxTaskGroups) {
      return InvalidArgument("user " + spec.user->name + " is in " +
                             std::to_string(spec.user->groups.size()) + " groups (at most " +
                             std::to_string(kMaxTaskGroups) + ")");
    }
    for (uint32_t g : spec.user->groups) creds.groups[creds.group_count++] = g;
    char text[kMaxTaskGroups * 11 + 32];
    if (FormatTaskCredentials(creds, text, sizeof text) == 0) {
      return Internal("user " + spec.user->name + ": credentials do not fit");
    }
    out.push_back(std::string("--creds=") + text);
  }
  if (!spec.workdir.empty()) out.push_back("--workdir=" + spec.workdir);
  if (!spec.cpus.empty()) out.push_back("--cpus=" + spec.cpus);
  if (!spec.ld_preload.empty()) out.push_back("--ld-preload=" + spec.ld_preload);
  if (spec.tasks_per_node > 1) {
    out.push_back("--tasks-per-node=" + std::to_string(spec.tasks_per_node));
  }
  if (spec.stop_signal > 0) out.push_back("--stop-signal=" + std::to_string(spec.stop_signal));
  if (spec.log_max_bytes > 0) {
    out.push_back("--log-max-size=" + std::to_string(spec.log_max_bytes));
  }
  return out;
}

// Opens the task's log (by descriptor of its directory, never through a link), gives it to
// the task's user, and creates the task's files next to it: their paths, by variable.
StatusOr<std::map<std::string, std::string>> OpenTaskFiles(const LaunchSpec& spec,
                                                           int* log_fd) {
  const auto [dir, log_name] = SplitPath(spec.log_path);
  GS_ASSIGN_OR_RETURN(DirFd dir_fd, OpenDirectory(dir));
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (spec.user) owner = std::make_pair(spec.user->uid, spec.user->gid);
  const mode_t mode = spec.user ? 0600 : 0644;
  GS_ASSIGN_OR_RETURN(*log_fd, OpenLogForAppend(dir_fd.get(), log_name, mode,
                                                "log " + spec.log_path));
  if (owner && (fchown(*log_fd, owner->first, owner->second) != 0 || fchmod(*log_fd, 0600) != 0)) {
    const int err = errno;
    close(std::exchange(*log_fd, -1));
    return Internal("log: cannot give " + spec.log_path + " to user " + spec.user->name + ": " +
                    std::strerror(err));
  }
  std::map<std::string, std::string> paths;
  for (const auto& [var, suffix] : spec.task_files) {
    StatusOr<int> fd = CreateTaskFile(dir_fd.get(), log_name + suffix, mode, owner,
                                      spec.log_path + suffix);
    if (!fd.ok()) {
      close(std::exchange(*log_fd, -1));
      return Internal(var + ": " + fd.status().message());
    }
    close(*fd);
    paths[var] = spec.log_path + suffix;
  }
  return paths;
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

std::string DefaultShimPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "gpusched-shim";
  return (exe.parent_path() / "gpusched-shim").string();
}

ShimSpawner::ShimSpawner(std::string shim_path) : shim_path_(std::move(shim_path)) {
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    // The agent's own GPUSCHED_* (its token, its server) are not its tasks' business.
    if (!core::IsReservedEnvName(name)) base_env_.emplace_back(std::move(name), kv);
  }
}

namespace {

// The descriptors the shim inherits, closed here once it runs (or could not start): its log,
// /dev/null for stdin, its status pipe (the read end is handed to the caller) and the task's
// GPU share file.
struct ChildFds {
  int log = -1, null = -1, share = -1;
  int status[2] = {-1, -1};
  ChildFds() = default;
  ChildFds(const ChildFds&) = delete;
  ChildFds& operator=(const ChildFds&) = delete;
  ~ChildFds() {
    for (int fd : {log, null, share, status[0], status[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  void CloseChildEnds() {
    for (int* fd : {&log, &null, &share, &status[1]}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
  int TakeStatusReader() { return std::exchange(status[0], -1); }
};

// Opens what the child inherits, but the log (OpenTaskFiles opened it).
Status OpenChildFds(const LaunchSpec& spec, ChildFds& fds) {
  fds.null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // A socket, not a pipe: the shim asks on it before its task may run (AnswerConfirmRequest).
  // Only the agent's end is non-blocking.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.status) != 0 ||
      fcntl(fds.status[0], F_SETFL, O_NONBLOCK) != 0) {
    return Unavailable(std::string("socketpair: ") + std::strerror(errno));
  }
  if (!spec.gpu_share_mib.empty()) {
    GS_ASSIGN_OR_RETURN(fds.share, CreateShareFile(spec.log_path + ".share", spec.gpu_share_mib));
  }
  return Status::Ok();
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

StatusOr<std::vector<std::string>> ShimSpawner::ShimArgv(const LaunchSpec& spec,
                                                         const std::string& program,
                                                         const std::string& journal_dir) const {
  GS_ASSIGN_OR_RETURN(std::vector<std::string> args, ShimOptions(spec));
  args.insert(args.begin(), shim_path_);
  for (const std::string& a : {journal_dir, std::to_string(spec.id),
                               std::to_string(spec.attempt), program}) {
    args.push_back(a);
  }
  args.insert(args.end(), spec.command.begin(), spec.command.end());
  return args;
}

StatusOr<SpawnedShim> ShimSpawner::Spawn(const LaunchSpec& spec, const std::string& program,
                                         const std::string& journal_dir,
                                         const std::vector<int>& cgroup_fds) {
  // Everything the child needs is prepared here: the child makes system calls only.
  GS_ASSIGN_OR_RETURN(std::vector<std::string> args, ShimArgv(spec, program, journal_dir));
  ChildFds fds;
  GS_ASSIGN_OR_RETURN(auto file_paths, OpenTaskFiles(spec, &fds.log));
  std::vector<std::string> env_strings = TaskEnvironment(base_env_, spec, file_paths);
  std::vector<char*> envp = Pointers(env_strings), argv = Pointers(args);
  GS_RETURN_IF_ERROR(OpenChildFds(spec, fds));
  sigset_t shim_mask;
  sigemptyset(&shim_mask);
  for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU}) {
    sigaddset(&shim_mask, s);
  }
  ChildArgs child{shim_path_.c_str(), argv.data(), envp.data(), fds.log,
                  fds.null,           fds.status[1], fds.share,  &shim_mask,
                  0,                  cgroup_fds.data(), cgroup_fds.size(), 0};
  // This thread is suspended until the child execs, so its stack and arguments stay valid.
  if (!child_stack_) child_stack_.reset(new char[kChildStackBytes]);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler may run in the shared memory
  const pid_t pid = CloneShim(&child, child_stack_.get() + kChildStackBytes);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  fds.CloseChildEnds();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(fork_errno));
  if (child.cgroup_errno != 0 || child.exec_errno != 0) {
    waitpid(pid, nullptr, 0);
    if (child.cgroup_errno != 0) {
      return FailedPrecondition(std::string("cgroup: cannot join the task's cgroup: ") +
                                std::strerror(child.cgroup_errno));
    }
    return FailedPrecondition("executor: cannot run the task supervisor " + shim_path_ + ": " +
                              std::strerror(child.exec_errno));
  }
  return SpawnedShim{pid, fds.TakeStatusReader()};
}

ConfirmOutcome AnswerConfirmRequest(int status_fd) {
  char c = 1;
  const ssize_t n = recv(status_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return ConfirmOutcome::kNotYet;
  }
  if (n != 1 || c != kConfirmRequest) return ConfirmOutcome::kNoRequest;  // EOF or a line
  (void)!recv(status_fd, &c, 1, MSG_DONTWAIT);
  return send(status_fd, &kConfirmAnswer, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1
             ? ConfirmOutcome::kAnswered
             : ConfirmOutcome::kNoRequest;  // the shim is gone
}

}  // namespace gpusched::agent
