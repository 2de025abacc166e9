#pragma once
// Agent: `gpusched agent` as an object (the `agent` command, `gpusched dev`, the demo and the
// end-to-end benchmark run it). It discovers the GPUs (NVML or simulated), serves task logs on
// its --listen address (which the server's probe daemon also checks), and keeps one AgentLink
// stream to the server, reconnecting with backoff: register, node heartbeats with per-GPU
// free memory and the tasks it runs (CN109992422A claims 5-6), task heartbeats (claim 7),
// task started/finished; it runs what it is assigned and kills what it is told to.
//
// Tasks outlive the agent. Each runs under its own supervisor (gpusched-shim) that journals
// its start and exit in <data-dir>/journal. An agent started on the same data dir adopts the
// tasks still running there, and reports the exits the server has not acknowledged: they
// stay in the journal until it does. Register carries both (two-way reconciliation: the
// server applies the exits, kills what it does not know, re-places what the agent lacks).
// Issue 39: both are the tasks of one cluster (one store). A server of another one, which
// numbers its tasks afresh, has the agent stop them and move their files aside first.
//
// Shutdown semantics: Shutdown(kLeaveTasks) leaves the tasks running for the next agent
// (`gpusched agent` on SIGTERM or SIGINT, like a kubelet or slurmd restart);
// Shutdown(kKillTasks) kills them (`gpusched dev`, the demo, benchmarks: in-process agents
// whose tasks must not outlive the command). The destructor kills.
//
// Thread-safety: Start, Shutdown and Wait from one thread.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/task_executor.h"
#include "base/status.h"
#include "core/node.h"

namespace gpusched::agent {

enum class ExecutorKind {
  kProcess,  // real processes under gpusched-shim
  kNoop,     // no process: "runs" for the Assign's duration_ms (benchmarks, soaks)
};
// "process" or "noop"; InvalidArgument naming --executor otherwise.
StatusOr<ExecutorKind> ParseExecutorKind(std::string_view name);

struct AgentConfig {
  // The server, or a comma-separated list of the servers of an HA control plane: the agent
  // connects to the leader (a standby's "not leader; leader is ADDR" sends it there).
  std::string server = "127.0.0.1:7070";
  std::string name;              // "" = host name
  std::string gpus = "8x80GiB";  // simulated GPUs when no NVML
  bool simulate = false;         // simulated GPUs even when NVML is present
  std::string listen = "127.0.0.1:0";
  // Task logs (logs/), the task journal (journal/), the id of the cluster they belong to
  // (cluster_id) and other clusters' files moved aside (clusters/ID/; issue 39,
  // cluster_identity.h). "" = <system temp dir>/gpusched-agent-<name>: stable across
  // restarts of an agent of that name, so it adopts its tasks.
  std::string data_dir;
  // Kubernetes-style rules sent with the registration (CN115981827A claim 1): tasks select
  // nodes by label, and only tasks that tolerate a taint are placed on its node.
  std::map<std::string, std::string> labels;
  std::vector<core::Taint> taints;
  bool quiet = false;            // no connect/disconnect lines on stderr
  ExecutorKind executor = ExecutorKind::kProcess;
  std::string shim_path;         // "" = gpusched-shim next to this executable
  // The library that holds GPU tasks to their memory share (src/preload), injected with
  // LD_PRELOAD into every task given GPUs. "" = libgpusched_preload.so next to this
  // executable (tasks run without it, and a warning says so, when it is not there);
  // "none" = never inject.
  std::string preload_path;
  // Faults injected for tests, one a line (core/gpu_health.h: "1 xid 79", "0 ecc",
  // "2 lost"): the agent reads lines added to the file as they come. "" = none.
  std::string fault_file;
  // The GPU interconnect: "" = NVML's (none with simulated GPUs), or simulated:
  // "pcie", "nvlink-pairs", "nvswitch" (core/topology.h).
  std::string topology;
  // How long a task may hold more GPU memory than its share (NVML per-process accounting)
  // before the watchdog stops it.
  DurationMs gpu_memory_grace_ms = 30'000;
  // How long a GPU that had a fault must pass its health checks before it takes tasks again.
  DurationMs gpu_health_period_ms = 300'000;
  // Mutual TLS to the server: presents DIR/<name>.crt and .key, trusts DIR/ca.crt
  // (`gpusched certs init DIR --agent NAME`). "" = plaintext.
  std::string tls_dir;
  // Issue 35: an agent token (`gpusched token create --agent NAME`), sent on the link as
  // `authorization: Bearer TOKEN`. A server with --auth token admits an agent without a
  // client certificate only with a token bound to its name. "" = none.
  std::string token;
  // Even as root, run every task as the agent's own user (a cluster whose submitters have no
  // accounts on the nodes: containers, `gpusched dev`, tests). Said at start.
  bool run_as_self = false;
  // Issue 39: the most output one task's log keeps (`log_max_size` in --config, default
  // 1 GiB); the shim drops the rest after a note in the log, and the agent logs it.
  int64_t log_max_size_bytes = int64_t{1} << 30;
  // Issue 39: a finished task's log and side files are removed this long after it ended
  // (`task_files_retention` in --config; default the server's retain_finished_for, 1h);
  // 0 = kept forever.
  DurationMs task_files_retention_ms = 3'600'000;
  // Issue 39: the log's level and format from --config (`log_level`, `log_format`); the
  // command applies them under its flags (cli/log_flags.h). "" = not given.
  std::string log_level, log_format;
  // Tests only (issue 40): wraps the executor the agent made, e.g. in one whose launches
  // block, to show that heartbeats go on meanwhile. Empty = none.
  std::function<std::unique_ptr<TaskExecutor>(std::unique_ptr<TaskExecutor>)> wrap_executor;
};

class Agent {
 public:
  static StatusOr<std::unique_ptr<Agent>> Start(const AgentConfig& config);
  ~Agent();  // Shutdown(kKillTasks) unless shut down already
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::string& name() const;
  const std::string& address() const;  // log service, as registered
  const std::string& data_dir() const;
  // Disconnects and stops; `mode` says whether the running tasks are killed or left to the
  // next agent on this data dir. Idempotent: the first call decides.
  void Shutdown(ShutdownMode mode);
  void Wait();

  struct Impl;  // opaque: gRPC types stay out of this header

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::agent
