#pragma once
// The executor's status of each running task (CN109992422A claim 7), carried by its task
// heartbeat. A task is hung when
//  - every process of its group is stopped (state T in /proc/PID/stat: SIGSTOP, SIGTSTP;
//    a debugger's tracing stop, t, is not), or
//  - it was given a heartbeat file ($GPUSCHED_HEARTBEAT_FILE, `submit --heartbeat-timeout`)
//    and neither the file's mtime nor, until the file exists, the task's start is within
//    $GPUSCHED_HEARTBEAT_TIMEOUT_MS of now.
// The server does not count a hung task's heartbeats as signs of life, so one hung for
// task_timeout is reclaimed and killed (claim 8).
//
// Thread-safety: ExecutorObserver is not thread-safe (the agent's heartbeat thread owns
// it); the free functions are.

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/task_executor.h"
#include "base/clock.h"

namespace gpusched::agent {

enum class TaskHealth { kRunning, kStopped, kHeartbeatStale };

struct TaskObservation {
  TaskHealth health = TaskHealth::kRunning;
  std::string detail;  // why it is hung; "" while running
};

// The names of the task's heartbeat variables (set by the agent at launch).
inline constexpr const char* kHeartbeatFileEnv = "GPUSCHED_HEARTBEAT_FILE";
inline constexpr const char* kHeartbeatTimeoutEnv = "GPUSCHED_HEARTBEAT_TIMEOUT_MS";

// A process's state and group, from the text of /proc/PID/stat: "pid (comm) state ppid pgrp
// ...". comm may hold spaces and parentheses. nullopt when the text is not of that form.
struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;  // > 0
};
std::optional<ProcStat> ParseProcStat(std::string_view text);

// The whole of a /proc file (at most `max_bytes`) by open and read, or nullopt when it cannot
// be read. A process that ends between the open and the read fails the read with ESRCH;
// iostreams turn that into an exception on some paths (libstdc++'s filebuf through
// istreambuf_iterator), which an ASan CI run saw end agents, so no /proc reader of the agent
// goes through them.
std::optional<std::string> ReadProcFile(const std::string& path, size_t max_bytes = 1 << 20);
// The same on a file already open (read from where it stands; `fd` stays open).
std::optional<std::string> ReadProcFd(int fd, size_t max_bytes = 1 << 20);

// The process groups among `groups` whose every live process is stopped (state T). Reads
// each leader's stat; walks `proc_root` only when a leader is stopped.
std::set<pid_t> StoppedGroups(const std::set<pid_t>& groups,
                              const std::string& proc_root = "/proc");

struct HeartbeatFile {
  std::string path;
  DurationMs timeout_ms = 0;
};
// The heartbeat file named by a NUL-separated environment (the text of /proc/PID/environ):
// both variables set, the timeout a positive number of ms in digits; nullopt otherwise.
std::optional<HeartbeatFile> ParseHeartbeatEnviron(std::string_view environ);
// The heartbeat file a process was given, from its environment (`proc_root`/PID/environ).
// Unset: the process has no (valid) heartbeat variables, or its environment cannot be read.
std::optional<HeartbeatFile> HeartbeatFileOf(pid_t pid, const std::string& proc_root = "/proc");

// Why the task is hung by its heartbeat file, or nothing while it is fresh: the file's mtime
// (lstat: a link is not followed), or `started_ms` while there is no file, older than the
// timeout. Unix times in ms.
std::optional<std::string> StaleHeartbeat(const HeartbeatFile& file, TimeMs started_ms,
                                          TimeMs now_ms);

class ExecutorObserver {
 public:
  // `heartbeat_path`, when set: the heartbeat file of each task is the one it names (the
  // agent's own, issue 35); the environment then says only the timeout, and a path the task
  // put there is never looked at.
  using HeartbeatPath = std::function<std::string(const TaskKey&)>;
  explicit ExecutorObserver(std::string proc_root = "/proc", HeartbeatPath heartbeat_path = {})
      : proc_root_(std::move(proc_root)), heartbeat_path_(std::move(heartbeat_path)) {}

  // The status of each task in `tasks` (TaskExecutor::Processes) at `now_ms` (Unix ms).
  // Each task's heartbeat file is read from its leader's environment once.
  std::map<TaskKey, TaskObservation> Observe(const std::map<TaskKey, TaskProcess>& tasks,
                                             TimeMs now_ms);

 private:
  const std::string proc_root_;
  const HeartbeatPath heartbeat_path_;
  std::map<TaskKey, std::optional<HeartbeatFile>> files_;  // the running tasks' only
};

}  // namespace gpusched::agent
