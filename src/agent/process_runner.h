#pragma once
// ProcessRunner: runs each task as a process in its own process group, with
// CUDA_VISIBLE_DEVICES set to exactly its GPUs and its GPU-memory share in the environment,
// stdout and stderr appended to a log file. Kill sends SIGTERM to the group, then SIGKILL
// after the grace period. Exits are reported through a callback.
//
// Every fork happens on the runner's own long-lived thread: children get PR_SET_PDEATHSIG,
// which fires when the forking *thread* exits, so a task never outlives its agent (an agent
// killed with -9 must not leave work running that the server reassigns elsewhere).
// Children are reaped by pid (never waitpid(-1)), so several runners can share a process.
// The thread sleeps in epoll_wait on one pidfd per child (readable when it exits) and an
// eventfd for requests, so an exit is seen at once and an idle runner costs nothing; where
// pidfd_open is missing (Linux < 5.3) it falls back to checking every few milliseconds.
//
// Thread-safety: all public methods may be called from any thread.

#include <sys/types.h>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/units.h"

namespace gpusched::agent {

struct LaunchSpec {
  uint64_t id = 0;
  int64_t attempt = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // added to the agent's environment
  std::string log_path;
};

struct ProcessExit {
  uint64_t id = 0;
  int64_t attempt = 0;
  int exit_code = 0;     // 128 + signal when killed by a signal
  std::string reason;    // "" for a plain exit
};

class ProcessRunner {
 public:
  using ExitCallback = std::function<void(const ProcessExit&)>;
  ProcessRunner(Clock& clock, ExitCallback on_exit);
  ~ProcessRunner();  // kills every task (SIGKILL) and waits for the thread

  // Starts the process; returns once it is forked. An unknown command is NotFound.
  Status Launch(const LaunchSpec& spec);
  // SIGTERM to the task's group now, SIGKILL after `grace_ms`. Unknown tasks are ignored.
  void Kill(uint64_t id, int64_t attempt, DurationMs grace_ms, const std::string& reason);
  std::vector<std::pair<uint64_t, int64_t>> Running() const;

 private:
  struct Child {
    pid_t pid = 0;
    int pidfd = -1;          // -1: no pidfd (old kernel), polled instead
    TimeMs kill_at_ms = -1;  // SIGKILL deadline, -1 = none
    std::string kill_reason;
  };
  struct Request {
    LaunchSpec spec;
    std::promise<Status> done;
  };
  void Loop();
  Status Fork(const LaunchSpec& spec);
  void Reap();
  void Wake();
  // REQUIRES: mu_ held. How long the thread may sleep: -1 = until woken.
  int WaitTimeoutMs() const;

  Clock& clock_;
  ExitCallback on_exit_;
  // The agent's environment, read once: (name, "NAME=value") pairs.
  std::vector<std::pair<std::string, std::string>> base_env_;
  static constexpr size_t kChildStackBytes = 64 * 1024;
  std::unique_ptr<char[]> child_stack_;  // the clone child's stack; used by the thread only
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: a request or stop is pending
  mutable std::mutex mu_;
  std::vector<Request*> requests_;
  std::map<std::pair<uint64_t, int64_t>, Child> children_;
  bool stop_ = false;
  std::thread thread_;
};

// Finds `program` on PATH (or checks it when it contains a '/'). NotFound names it.
StatusOr<std::string> ResolveProgram(const std::string& program);

}  // namespace gpusched::agent
