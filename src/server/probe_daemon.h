#pragma once
// ProbeDaemon: CN115981827A claim 9's ProbeConnectDaemon. Every probe_interval it opens a TCP
// connection to each connected agent's advertised address (timeout probe_timeout); a node
// counts as reachable if a probe succeeded within the last two intervals (PATENTS.md section
// 4 [choice]). Unreachable nodes are filtered out before any other filter.
//
// Thread-safety: Start/Stop from one thread; the daemon runs on its own thread.

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "server/control_plane.h"

namespace gpusched::server {

// One TCP connect to "host:port" within `timeout_ms`. True if it connected.
bool ProbeTcp(const std::string& address, DurationMs timeout_ms);

class ProbeDaemon {
 public:
  ProbeDaemon(ControlPlane& cp, Clock& clock) : cp_(cp), clock_(clock) {}
  ~ProbeDaemon() { Stop(); }
  void Start();
  void Stop();

 private:
  void Run();
  ControlPlane& cp_;
  Clock& clock_;
  std::map<std::string, TimeMs> last_success_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpusched::server
