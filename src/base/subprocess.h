#pragma once
// ChildProcess: a program started as a real process (another `gpusched` server or agent, an
// etcd member), so that benchmarks, `gpusched dev --ha` and tests can kill it with SIGKILL,
// stop it with SIGSTOP and start it again. Output goes to a log file. The child dies with
// this process (PR_SET_PDEATHSIG).
//
// Thread-safety: none; one owner.

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // SIGKILL and reap
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Runs this very executable with `args` (argv[1..]), output appended to `log_path`.
  Status Start(const std::vector<std::string>& args, const std::string& log_path);
  // Runs `program` (a path, or a name looked up in PATH) with `args`.
  Status StartProgram(const std::string& program, const std::vector<std::string>& args,
                      const std::string& log_path);
  // Sends `sig` without waiting (SIGSTOP, SIGCONT).
  void Signal(int sig);
  // Sends `sig` and waits for the exit. No-op when not running.
  void Kill(int sig);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Resident memory of `pid` in KiB (VmRSS), or -1.
int64_t ResidentKib(pid_t pid);

// A free TCP port on 127.0.0.1 (bound once and released).
int FreeLoopbackPort();

}  // namespace gpusched
