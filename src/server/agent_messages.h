#pragma once
// Issue 40: what an agent tells the control plane, in core types. The agent stream's door
// (async_agent_link.cc) converts the gpusched.v1 messages it reads (agent_convert.h) and
// refuses bad values there; ControlPlane and LoopInbox see only these structs.

#include <cstdint>
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

}  // namespace gpusched::server
