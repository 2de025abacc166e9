#pragma once
// ChildProcess: another `gpusched` (server or agent) started by a benchmark as a real
// process, so that it can be killed with SIGKILL and started again (bench chaos, bench
// soak). Output goes to a log file. The child dies with this process (PR_SET_PDEATHSIG).
//
// Thread-safety: none; one owner.

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched::cli {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // SIGKILL and reap
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Runs this very executable with `args` (argv[1..]), output appended to `log_path`.
  Status Start(const std::vector<std::string>& args, const std::string& log_path);
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

// GET http://127.0.0.1:port/path; the body, or "" on any error.
std::string HttpGetLoopback(int port, const std::string& path);

}  // namespace gpusched::cli
