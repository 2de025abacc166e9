#pragma once
// TaskExecutor: how an agent runs the tasks it is assigned. Two implementations:
// ProcessRunner (real processes, each under its own gpusched-shim supervisor, exits kept in a
// journal on the node) and NoopExecutor (no process at all, for benchmarks and soaks of the
// control plane). The agent launches, kills and lists tasks through this interface and hears
// of every exit through the callback.
//
// Contract shared by both:
//  - on_exit is called exactly once per exit the executor learns of, from a thread of the
//    executor (or from the thread that opens it, for exits found at start), never while the
//    executor holds its own locks, and never after Stop returns.
//  - Launch of an (id, attempt) that is running is AlreadyExists and changes nothing.
//  - Kill of an (id, attempt) that is not running is ignored.
//
// Thread-safety: every method may be called from any thread.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::agent {

using TaskKey = std::pair<uint64_t, int64_t>;  // (task id, attempt)

// The Unix account a task runs as when it is not the agent's own (the agent is root and the
// task names its user): looked up on this node before the launch.
struct TaskUser {
  std::string name;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups (initgroups' list)
  std::string home;              // HOME of the task
};

// What a task runs with. The trust boundary (issue 35): `env` is the task's, data only; what
// decides the task's identity, files, CPUs and preload is in the other fields, which the
// agent sets, and reaches gpusched-shim on its argv, never through an environment.
// What a task's cgroup enforces (task_cgroup.h; ProcessRunner only). 0 = no limit.
struct TaskLimits {
  int64_t mem_mib = 0;    // --mem
  int64_t cpu_milli = 0;  // --cpu
  std::vector<int> gpus;  // the task's GPUs: device indices on the node (= char 195:index)
  int node_gpus = 0;      // how many GPUs the node has (each other one is denied)
};

struct LaunchSpec {
  uint64_t id = 0;
  int64_t attempt = 0;
  std::vector<std::string> command;
  // The task's own variables, over the agent's environment. Reserved names
  // (core::IsReservedEnvName: GPUSCHED_*) are dropped from both, whoever set them.
  std::map<std::string, std::string> env;
  // The values the agent sets (GPUSCHED_TASK_ID, GPUSCHED_GPU_MEM_MIB, ...), after `env`.
  std::map<std::string, std::string> agent_env;
  // Files the task is told to write: variable -> suffix. The executor creates each as
  // log_path + suffix (next to the log, in the agent's directory; never a path the task
  // names), gives it to `user`, and sets the variable to its path.
  std::map<std::string, std::string> task_files;
  std::string workdir;  // the task's working directory; "" = the agent's
  std::string cpus;        // "0-7,16-23": CPUs the task is pinned to; "" = not pinned
  std::string ld_preload;  // LD_PRELOAD of the task only (never of its supervisor)
  int tasks_per_node = 1;  // > 1: that many copies of the command (rank_launcher.h)
  // What a stop (Kill) sends the task first instead of SIGTERM (the spec's --signal, issue
  // 37); 0 = SIGTERM. ProcessRunner hands it to the shim as --stop-signal.
  int stop_signal = 0;
  // Issue 39: the most of the task's output its log keeps (the agent's log_max_size); the
  // shim drops the rest after a note (shim_main.cc "Output"). 0 = no cap.
  int64_t log_max_bytes = 0;
  std::string log_path;
  // Set: the task runs as this account (ProcessRunner only); its log is then owned by it and
  // readable by it only (0600). Unset: as the agent's user.
  std::optional<TaskUser> user;
  DurationMs duration_ms = 0;  // NoopExecutor only: how long the task "runs"
  TaskLimits limits;
  // Set (MiB per GPU, "4096,8192"): ProcessRunner writes the task's share file
  // (<log>.share, task_share_file.h) and hands it to the task on preload::kShareFd.
  std::string gpu_share_mib;
};

struct TaskExit {
  uint64_t id = 0;
  int64_t attempt = 0;
  int exit_code = 0;   // 128 + signal when killed by a signal; -1 when the task was lost
  std::string reason;  // "" for a plain exit
  TimeMs finished_ms = 0;  // when it ended (Unix ms, the supervisor's journal); 0 = unknown
  // It never ran, for a reason no retry fixes: its user cannot enter its working directory
  // or run its command (found by gpusched-shim as that user).
  bool permanent = false;
};

// The process group a running task leads, and when it started (Unix ms): what the agent
// looks at for the executor status of its task heartbeat (executor_status.h).
struct TaskProcess {
  pid_t pgid = 0;
  TimeMs started_ms = 0;
};

// What happens to running tasks when an agent stops.
enum class ShutdownMode {
  // SIGKILL every task and wait for it to end: `gpusched dev`, the demo, benchmarks, tests.
  // Their exits are not reported; they stay in the journal for the next agent.
  kKillTasks,
  // Leave them running under their supervisors; the next agent on the same data dir adopts
  // them (`gpusched agent` on SIGTERM, like kubelet and slurmd restarts).
  kLeaveTasks,
};

// The keys of a map keyed by TaskKey, in key order (what Running returns).
template <typename Map>
std::vector<TaskKey> KeysOf(const Map& tasks) {
  std::vector<TaskKey> keys;
  keys.reserve(tasks.size());
  for (const auto& entry : tasks) keys.push_back(entry.first);
  return keys;
}

class TaskExecutor {
 public:
  using ExitCallback = std::function<void(const TaskExit&)>;
  virtual ~TaskExecutor() = default;

  // Starts the task; returns once it is under way (its exit will be reported). A command
  // or working directory that cannot be found is NotFound (no retry can fix it).
  virtual Status Launch(const LaunchSpec& spec) = 0;
  // SIGTERM now, SIGKILL after `grace_ms`; the exit is then reported with the reason
  // "killed: <reason>".
  virtual void Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
                    const std::string& reason) = 0;
  // Every task running now, adopted ones included, and those that ended whose exit the
  // callback is handling (until it returns: a registration composed meanwhile names a task
  // running or, once the callback queued its report, finished; never neither), in key order.
  virtual std::vector<TaskKey> Running() const = 0;
  // The running tasks whose process is known (ProcessRunner: once the shim has recorded
  // it). None by default: an executor without processes (NoopExecutor) reports no status.
  virtual std::map<TaskKey, TaskProcess> Processes() { return {}; }
  // The task of each process of a running task (ProcessRunner: from each task's cgroup,
  // else its process group), never from what a process's environment claims. None by
  // default.
  virtual std::map<pid_t, TaskKey> TaskPids() { return {}; }
  // The server has recorded the exit of (id, attempt): forget it. Until then it is kept
  // (on disk, for ProcessRunner) and reported again by the next executor on the same node.
  virtual void Acknowledge(uint64_t id, int64_t attempt) = 0;
  // Stops reporting and, per `mode`, kills the tasks or leaves them running. Idempotent;
  // Launch fails after it.
  virtual void Stop(ShutdownMode mode) = 0;
};

}  // namespace gpusched::agent
