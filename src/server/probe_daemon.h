#pragma once
// ProbeDaemon: CN115981827A claim 9's ProbeConnectDaemon. Every probe_interval it opens a TCP
// connection to each connected agent's advertised address (timeout probe_timeout); a node
// counts as reachable if a probe succeeded within the last two intervals (PATENTS.md section
// 4 [choice]). Unreachable nodes are filtered out before any other filter.
//
// Probes of one round run concurrently (kProbeWorkers at a time, on the daemon's own pool),
// so a silent node costs the round at most one probe_timeout of one worker and delays no
// other node's probe beyond that. While the daemon runs, a node that (re)registers is held
// unreachable until its own probe succeeded: the daemon is woken at once and probes it before
// its first task can be placed there (ControlPlane::AttachProber).
//
// Thread-safety: Start/Stop from one thread; the daemon runs on its own thread.

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "server/control_plane.h"

namespace gpusched::server {

// One TCP connect to "host:port" within `timeout_ms` (real time: the kernel's poll). True if
// it connected; a refused, unresolvable or silent address is false.
bool ProbeTcp(const std::string& address, DurationMs timeout_ms);

// ProbeTcp of every address at once on `pool`; result i is addresses[i]'s.
std::vector<bool> ProbeConcurrently(const std::vector<std::string>& addresses,
                                    DurationMs timeout_ms, Executor& pool);

class ProbeDaemon {
 public:
  static constexpr size_t kProbeWorkers = 16;

  ProbeDaemon(ControlPlane& cp, Clock& clock) : cp_(cp), clock_(clock), pool_(kProbeWorkers) {}
  ~ProbeDaemon() { Stop(); }
  void Start();
  void Stop();

 private:
  void Run();
  void Wake();  // a node waits for its first probe
  // Probes `targets` and reports each result to the control plane.
  void Round(const std::vector<ControlPlane::ProbeTarget>& targets, DurationMs interval);

  ControlPlane& cp_;
  Clock& clock_;
  ThreadPool pool_;  // only the daemon's thread calls ParallelFor
  std::map<std::string, TimeMs> last_success_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool wake_ = false;
  std::thread thread_;
};

}  // namespace gpusched::server
