#pragma once
// ShimSpawner: starts gpusched-shim for one task, the way shim_main.cc expects to be
// started (argv with the options the agent decides, the task's environment without reserved
// names, stdin on /dev/null, stdout and stderr on the log, fd 3 a status socket on which it
// asks to start the task once it has journaled it (shim_confirm.h; the caller answers), the
// signals it waits for blocked). It creates the task's log and files in the log's directory
// (task_files.h) and never opens a path the task's environment names. It uses clone(CLONE_VM |
// CLONE_VFORK), as posix_spawn does: fork() of an agent with many threads and mappings
// copies page tables and cost ~30 ms of system time per task.
//
// Thread-safety: none. Calls share one clone stack; the owner serialises them.

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/shim_confirm.h"
#include "agent/task_executor.h"
#include "base/status.h"

namespace gpusched::agent {

// A shim just started: a child of this process until it is reaped.
struct SpawnedShim {
  pid_t pid = 0;
  int status_fd = -1;  // the agent's end of its status socket (non-blocking); the caller closes it
};

// The shim's start request on `status_fd` (shim_confirm.h), answered without waiting:
//   kAnswered   the request was read and kConfirmAnswer sent: the task runs;
//   kNotYet     nothing to read yet: ask again when the socket is readable;
//   kNoRequest  the shim ended, or wrote something else first (a failure line, left
//               readable for its exit's reader): it will not ask.
enum class ConfirmOutcome { kAnswered, kNotYet, kNoRequest };
ConfirmOutcome AnswerConfirmRequest(int status_fd);

class ShimSpawner {
 public:
  // `shim_path`: the gpusched-shim executable. The agent's environment is read once here.
  explicit ShimSpawner(std::string shim_path);

  // Starts the shim for `spec`, which runs `program` (a path, or a name the shim looks up
  // on the task's PATH as the task's user) and journals into `journal_dir`. Returns once the
  // shim runs; it starts the task only once the caller answers its request on status_fd
  // (AnswerConfirmRequest), after it has journaled the task's run record. The shim's own failures later (it cannot journal, fork) arrive on status_fd;
  // the task's (its user cannot enter its workdir or run its command) in its journaled exit.
  // `cgroup_fds`: cgroup.procs files open for writing; the shim joins each before it execs.
  StatusOr<SpawnedShim> Spawn(const LaunchSpec& spec, const std::string& program,
                              const std::string& journal_dir,
                              const std::vector<int>& cgroup_fds = {});
  const std::string& shim_path() const { return shim_path_; }

 private:
  // shim_path, its options for `spec`, then JOURNAL_DIR ID ATTEMPT PROGRAM and the command.
  StatusOr<std::vector<std::string>> ShimArgv(const LaunchSpec& spec, const std::string& program,
                                              const std::string& journal_dir) const;

  const std::string shim_path_;
  // The agent's environment: (name, "NAME=value") pairs.
  std::vector<std::pair<std::string, std::string>> base_env_;
  static constexpr size_t kChildStackBytes = 64 * 1024;
  // The clone child's stack. Allocated once and not zeroed: filling 64 KiB per task showed
  // in profiles.
  std::unique_ptr<char[]> child_stack_;
};

// Finds `program` on the agent's PATH (or checks it when it contains a '/'), as the agent's
// own user: for tasks that run as that user only. NotFound names it.
StatusOr<std::string> ResolveProgram(const std::string& program);

// gpusched-shim next to the running executable (/proc/self/exe's directory).
std::string DefaultShimPath();

}  // namespace gpusched::agent
