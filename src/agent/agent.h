#pragma once
// Agent: `gpusched agent` as an object (the `agent` command, `gpusched dev`, the demo and the
// end-to-end benchmark run it). It discovers the GPUs (NVML or simulated), serves task logs on
// its --listen address (which the server's probe daemon also checks), and keeps one AgentLink
// stream to the server, reconnecting with backoff: register, node heartbeats with per-GPU
// free memory and the tasks it runs (CN109992422A claims 5-6), task heartbeats (claim 7),
// task started/finished; it runs what it is assigned and kills what it is told to.
// Finished reports are kept until the server acknowledges them, so a task that ends while
// the server is down is reported after it comes back.
//
// Thread-safety: Start, Shutdown and Wait from one thread.

#include <map>
#include <memory>
#include <string>

#include "base/status.h"

namespace gpusched::agent {

struct AgentConfig {
  std::string server = "127.0.0.1:7070";
  std::string name;              // "" = host name
  std::string gpus = "8x80GiB";  // simulated GPUs when no NVML
  bool simulate = false;         // simulated GPUs even when NVML is present
  std::string listen = "127.0.0.1:0";
  std::string data_dir;          // task logs; "" = a folder under the system temp dir
  std::map<std::string, std::string> labels;
  bool quiet = false;            // no connect/disconnect lines on stderr
};

class Agent {
 public:
  static StatusOr<std::unique_ptr<Agent>> Start(const AgentConfig& config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::string& name() const;
  const std::string& address() const;  // log service, as registered
  // Kills running tasks and disconnects. Idempotent.
  void Shutdown();
  void Wait();

  struct Impl;  // opaque: gRPC types stay out of this header

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::agent
