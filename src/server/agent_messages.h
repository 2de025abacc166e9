#pragma once
// Issue 40: what an agent tells the control plane, and what the control plane tells an agent,
// in core types. The agent stream's door (async_agent_link.cc) converts the gpusched.v1
// messages it reads and writes (agent_convert.h) and refuses bad values there; ControlPlane,
// LoopInbox and AgentChannel see only these structs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/units.h"
#include "core/node.h"
#include "core/scheduler.h"

namespace gpusched::server {

// One task's start or end, as its node reports it (v1::TaskStatus).
struct TaskReport {
  enum class Kind { kStarted, kFinished };
  // Who measured peak_gpu_mem_mib (issue 36): the memory table learns only from the agent's
  // own measurement; kUnknown (older agents) counts as task-written.
  enum class PeakSource { kUnknown, kAgentMeasured, kTaskWritten };

  TaskId id;
  int64_t attempt = 0;
  Kind kind = Kind::kStarted;
  // kFinished only, below.
  int exit_code = 0;
  MiB peak_gpu_mem_mib = 0;  // 0 = unknown
  PeakSource peak_source = PeakSource::kUnknown;
  std::string reason;
  bool gpu_mem_exceeded = false;  // it wanted more GPU memory than its share
  bool permanent = false;         // no retry can fix it (no such program, ...)
  bool out_of_memory = false;     // the kernel's OOM killer, at the cgroup's limit
  TimeMs finished_ms = 0;         // on the node's clock (Unix ms); 0 = unknown
  DurationMs ended_ago_ms = 0;    // how long before the report the task ended; 0 = now
};

// (task, attempt): what an agent runs.
using RunningRef = std::pair<TaskId, int64_t>;

// The first message of an agent's stream (v1::RegisterNode): the node, and for the two-way
// reconciliation what the agent runs and the exits not acknowledged yet.
struct AgentRegistration {
  core::NodeSpec spec;
  std::string instance;    // the agent process's id (issue 37); "" = not said
  std::string cluster_id;  // the cluster its files belong to (issue 39); "" = not known
  std::vector<RunningRef> running;
  std::vector<TaskReport> finished;
};

// One running task's heartbeat (v1::TaskRef of TaskHeartbeats).
struct TaskBeat {
  TaskId id;
  int64_t attempt = 0;
  std::optional<core::GpuUsage> usage;  // none: the agent cannot tell
  core::ExecutorReport executor;
};

struct TaskBeats {
  std::vector<TaskBeat> tasks;
};

// What a message after the registration carries: nothing the control plane reads
// (std::monostate: an empty message, a repeated registration), the node's heartbeat (its
// `node` is set by the control plane), task heartbeats, or a task's status.
using AgentReport = std::variant<std::monostate, core::NodeHeartbeat, TaskBeats, TaskReport>;

// ---- what the control plane sends (v1::ServerMessage); the door's Registered is its own.

// Run a task's attempt (a gang's rank) on the agent's node (v1::Assign).
struct TaskAssignment {
  TaskId id;
  int64_t attempt = 0;
  std::string name;
  std::vector<int> gpus;
  std::vector<MiB> gpu_mem_mib;  // per GPU of `gpus`
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // a gang's WORLD_SIZE, RANK, ... included
  int rank = 0;                            // a gang's rank on this node
  std::optional<DurationMs> duration_ms;   // the noop executor's run time
  std::optional<DurationMs> heartbeat_timeout_ms;
  std::optional<int> stop_signal;  // none = SIGTERM (issue 37)
  std::string workdir;             // "" = the agent's
  MiB cgroup_mem_mib = 0;          // 0 = no limit
  int64_t cgroup_cpu_milli = 0;
  std::string user;                // "" = the agent's own
  bool submitted_by_root = false;  // issue 35
};

// Stop an attempt (v1::Kill).
struct TaskKill {
  TaskId id;
  int64_t attempt = 0;
  std::string reason;
  std::optional<DurationMs> grace_ms;  // none = the agent's own kill grace
};

// A reported status is durable: the agent may drop it from its journal (v1::StatusAck).
struct StatusAck {
  TaskId id;
  int64_t attempt = 0;
};

using AgentOrder = std::variant<TaskAssignment, TaskKill, StatusAck>;

}  // namespace gpusched::server
