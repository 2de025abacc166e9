#include "agent/shim_spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/task_credentials.h"
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
  const char* workdir;  // nullptr = the agent's
  int exec_errno;       // written by the child when execve fails
  int chdir_errno;      // written by the child when chdir fails
};

// Runs in the child, on its own stack, sharing the agent's memory until execve: only system
// calls, no allocation, not instrumented. No parent-death signal: the shim must outlive the
// agent.
__attribute__((no_sanitize("address", "undefined"))) int ChildMain(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  // The signals the shim waits for stay blocked until it waits for them (and job control
  // cannot stop it before it leaves the agent's session); the agent's own mask is not the
  // task's. setsid is left to the shim: it can take milliseconds (a new scheduler autogroup)
  // and this thread blocks the agent's until execve.
  sigprocmask(SIG_SETMASK, a->shim_mask, nullptr);
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
  if (a->workdir != nullptr && chdir(a->workdir) != 0) {
    a->chdir_errno = errno;
    _exit(127);
  }
  execve(a->shim, a->argv, a->envp);
  a->exec_errno = errno;
  _exit(127);
}

// The files a task running as another user is told to write next to its log (the share
// ledger, the simulated peak and utilisation, the heartbeat file): created here, owned by
// that user, 0600, as the log directory is the agent's.
const char* const kTaskFileEnv[] = {"GPUSCHED_PRELOAD_STATE", "GPUSCHED_PEAK_MIB_FILE",
                                    "GPUSCHED_SIM_GPU_UTIL_FILE", "GPUSCHED_HEARTBEAT_FILE"};

// Gives the log (open as `log_fd`) and the task's files to `user`, readable by it only.
Status HandOver(const LaunchSpec& spec, const TaskUser& user, int log_fd) {
  if (fchown(log_fd, user.uid, user.gid) != 0 || fchmod(log_fd, 0600) != 0) {
    return Internal("log: cannot give " + spec.log_path + " to user " + user.name + ": " +
                    std::strerror(errno));
  }
  for (const char* name : kTaskFileEnv) {
    auto it = spec.env.find(name);
    if (it == spec.env.end()) continue;
    const int fd = open(it->second.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || fchown(fd, user.uid, user.gid) != 0 || fchmod(fd, 0600) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      return Internal(std::string(name) + ": cannot give " + it->second + " to user " +
                      user.name + ": " + std::strerror(err));
    }
    close(fd);
  }
  return Status::Ok();
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
    base_env_.emplace_back(kv.substr(0, kv.find('=')), kv);
  }
}

StatusOr<SpawnedShim> ShimSpawner::Spawn(const LaunchSpec& spec, const std::string& program,
                                         const std::string& journal_dir) {
  // Everything the child needs is prepared here: the child makes system calls only.
  std::vector<std::string> env_strings;
  env_strings.reserve(base_env_.size() + spec.env.size());
  for (const auto& [key, kv] : base_env_) {
    if (spec.env.count(key) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
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
    env_strings.push_back(std::string(kTaskCredsEnv) + "=" + text);
  }
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {shim_path_, journal_dir, std::to_string(spec.id),
                                   std::to_string(spec.attempt), program};
  args.insert(args.end(), spec.command.begin(), spec.command.end());
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                          spec.user ? 0600 : 0644);
  if (log_fd < 0) {
    return Internal("log: cannot open " + spec.log_path + ": " + std::strerror(errno));
  }
  if (spec.user) {
    if (Status handed = HandOver(spec, *spec.user, log_fd); !handed.ok()) {
      close(log_fd);
      return handed;
    }
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return Unavailable(std::string("pipe: ") + std::strerror(err));
  }
  int share_fd = -1;
  if (!spec.gpu_share_mib.empty()) {
    StatusOr<int> share = CreateShareFile(spec.log_path + ".share", spec.gpu_share_mib);
    if (!share.ok()) {
      close(log_fd);
      if (null_fd >= 0) close(null_fd);
      close(status_pipe[0]);
      close(status_pipe[1]);
      return share.status();
    }
    share_fd = *share;
  }
  sigset_t shim_mask;
  sigemptyset(&shim_mask);
  for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU}) {
    sigaddset(&shim_mask, s);
  }
  ChildArgs child{shim_path_.c_str(), argv.data(), envp.data(), log_fd,
                  null_fd,            status_pipe[1], share_fd,       &shim_mask,
                  spec.workdir.empty() ? nullptr : spec.workdir.c_str(), 0, 0};
  // This thread is suspended until the child execs, so its stack and arguments stay valid.
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
  if (share_fd >= 0) close(share_fd);
  close(status_pipe[1]);
  if (pid < 0) {
    close(status_pipe[0]);
    return Unavailable(std::string("fork: ") + std::strerror(fork_errno));
  }
  if (child.chdir_errno != 0) {
    waitpid(pid, nullptr, 0);
    close(status_pipe[0]);
    return NotFound("workdir: " + spec.workdir + ": " + std::strerror(child.chdir_errno));
  }
  if (child.exec_errno != 0) {
    waitpid(pid, nullptr, 0);
    close(status_pipe[0]);
    return FailedPrecondition("executor: cannot run the task supervisor " + shim_path_ + ": " +
                              std::strerror(child.exec_errno));
  }
  return SpawnedShim{pid, status_pipe[0]};
}

}  // namespace gpusched::agent
