#pragma once
// SimAgentFleet: the agents of `bench scale` (issue 43). N agents that speak
// gpusched.v1.AgentLink to a real server over gRPC, each on a TCP connection of its own, all
// driven by a few threads on completion queues. A thread per agent, or gpusched's whole Agent
// (log service, GPU monitor, journal) per node, would measure this process rather than the
// server: at 10,000 agents that is 10,000 gRPC servers in one process.
//
// Each agent registers a node of `gpus` simulated GPUs, sends a node heartbeat on the period
// the server's Registered names (the first one at a random point of it, so the fleet does not
// beat in step), task heartbeats on theirs, and runs what it is assigned as the noop executor
// does: STARTED at once, FINISHED after the Assign's duration_ms; a Kill ends the task at
// once. Every node registers the fleet's own TCP listener as its address, which accepts and
// closes (the server's probe daemon connects to it: CN115981827A claim 9).
//
// It times each FINISHED to the server's StatusAck, which the server sends once the exit is
// committed: the lag from a message on an agent's stream to the state it changes. Heartbeats
// go through the same stream and the same inbox of the control plane's loop ahead of it.
//
// Seeds: the heartbeat offsets come from `seed`; the same seed gives the same offsets.
// Thread-safety: Start, Counters, TakeAckLags and Stop from one thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched::cli {

struct SimFleetOptions {
  std::string server;  // host:port of the server's gRPC listener
  int agents = 1000;
  int threads = 2;     // completion queues, each with its thread, sharing the agents
  std::string name_prefix = "sim-";  // node i is PREFIXi (1-based, zero-padded to 5)
  int gpus = 8;
  int64_t gpu_mib = 81'920;
  uint64_t seed = 1;
};

struct SimFleetCounters {
  int64_t registered = 0;       // agents the server answered with Registered
  int64_t heartbeats = 0;       // node heartbeats sent
  int64_t task_heartbeats = 0;  // task heartbeat messages sent
  int64_t assigned = 0;         // Assign messages received
  int64_t finished = 0;         // FINISHED sent (run out or killed)
  int64_t killed = 0;           // Kill messages received
  int64_t streams_ended = 0;    // streams the server or the transport ended before Stop
};

class SimAgentFleet {
 public:
  static StatusOr<std::unique_ptr<SimAgentFleet>> Start(const SimFleetOptions& options);
  ~SimAgentFleet();  // Stop
  SimAgentFleet(const SimAgentFleet&) = delete;
  SimAgentFleet& operator=(const SimAgentFleet&) = delete;

  SimFleetCounters Counters() const;
  // The FINISHED -> StatusAck lags (ms) measured since the last call.
  std::vector<double> TakeAckLags();
  // Cancels every stream and waits for the threads (at most a few seconds). Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit SimAgentFleet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::cli
