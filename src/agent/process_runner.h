#pragma once
// ProcessRunner: the process executor. Each task runs under its own supervisor,
// gpusched-shim (shim_main.cc), which starts it in its own process group with
// CUDA_VISIBLE_DEVICES set to exactly its GPUs and its GPU-memory share in the environment,
// output appended to the task's log, and journals its start and its exit in the journal
// directory. The shim is not tied to the agent's life, so tasks outlive an agent restart:
// Open adopts the tasks whose shim still runs and reports the exits the journal holds.
//
// Kill sends SIGTERM to the shim, which forwards it to the task's group, then SIGUSR1 after
// the grace period, which the shim turns into SIGKILL of the group. Exits are reported
// through the callback and stay in the journal until Acknowledge.
//
// Shims this runner started are its children, reaped by pid (never waitpid(-1), so several
// runners can share a process). Adopted shims are not (their parent was the old agent):
// they are watched through a pidfd, and named by (boot id, pid, start time) so a reused pid
// is never mistaken for them. A runner thread sleeps in epoll_wait on one pidfd per shim
// and an eventfd for requests; where pidfd_open is missing (Linux < 5.3) it checks every
// few milliseconds instead.
//
// Thread-safety: all public methods may be called from any thread.

#include <sys/types.h>

#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/journal.h"
#include "agent/shim_spawner.h"
#include "agent/task_cgroup.h"
#include "agent/task_executor.h"
#include "base/clock.h"
#include "base/status.h"

namespace gpusched::agent {

// The poll timeout until a SIGKILL deadline: its milliseconds from `now_ms` plus one, at
// least 1 and at most a day and a millisecond; a longer wait ends early and is asked again.
// Issue 40: a kill_grace above 24.8 days overflowed an int (a negative timeout waits forever)
// and the kill never came.
int PollTimeoutUntil(TimeMs deadline_ms, TimeMs now_ms);

struct ProcessRunnerOptions {
  std::string journal_dir;  // <data-dir>/journal; created when missing
  std::string shim_path;    // "" = gpusched-shim next to this process's executable
  // Set and enabled: each task runs in a cgroup of its own with its LaunchSpec::limits,
  // removed when its exit is settled (adopted tasks' too). Unset: no cgroups.
  std::shared_ptr<TaskCgroups> cgroups;
};

class ProcessRunner final : public TaskExecutor {
 public:
  // Locks and reads the journal, adopts the tasks whose shim is alive, and, before it
  // returns, reports through `on_exit` every exit the journal holds that was not
  // acknowledged: tasks that ended while no agent ran, and tasks whose shim died without
  // recording an exit (exit code -1, "the task's supervisor died"; what is left of such a
  // task is killed). Fails with a clear error when the journal or the shim is unusable.
  static StatusOr<std::unique_ptr<ProcessRunner>> Open(Clock& clock,
                                                       const ProcessRunnerOptions& options,
                                                       ExitCallback on_exit);
  ~ProcessRunner() override;  // Stop(kKillTasks) unless stopped already

  // Returns once the shim runs; the shim records the task before it execs it. NotFound
  // for an unknown command or workdir of a task that runs as the agent's user; a task of
  // another user is checked as that user by the shim, and ends with exit 127, a "launch
  // failed: ..." reason and `permanent`.
  Status Launch(const LaunchSpec& spec) override;
  void Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
            const std::string& reason) override;
  std::vector<TaskKey> Running() const override;
  // From each task's .run record (read once per task).
  std::map<TaskKey, TaskProcess> Processes() override;
  // From each task's cgroup.procs; without cgroups, from the process groups in /proc.
  std::map<pid_t, TaskKey> TaskPids() override;
  // Deletes the task's records from the journal. Ignored while the task runs.
  void Acknowledge(uint64_t id, int64_t attempt) override;
  // kKillTasks: SIGKILL every task through its shim and wait for the shim to record the
  // exit. kLeaveTasks: close what watches the shims and leave them running. In both cases
  // nothing more is reported, and the journal lock is released.
  void Stop(ShutdownMode mode) override;

 private:
  struct Shim {
    pid_t pid = 0;
    int pidfd = -1;           // -1: no pidfd (old kernel), polled instead
    bool own_child = false;   // started here: reaped with waitpid; else adopted
    int status_fd = -1;       // own children: the agent end of the shim's status socket
    journal::ProcessId identity;  // adopted ones: who the shim is, whatever its pid
    TimeMs kill_at_ms = -1;   // SIGUSR1 (SIGKILL of the group) deadline, -1 = none
    bool killed_hard = false;
    std::string kill_reason;
    TaskProcess process;  // pgid 0 until the shim's .run record was read
  };
  ProcessRunner(Clock& clock, std::unique_ptr<Journal> journal, std::string shim_path,
                std::shared_ptr<TaskCgroups> cgroups, ExitCallback on_exit);
  // Adopts or settles every record of the journal; returns the exits to report.
  StatusOr<std::vector<TaskExit>> Recover();
  // REQUIRES: mu_ held. Starts watching `shim` (its pidfd joins the epoll set).
  void Watch(const TaskKey& key, Shim shim);
  void Loop();
  // Settles every shim that has exited (and sends due SIGKILLs); returns their exits.
  std::vector<TaskExit> Reap();
  // Answers the start requests of the shims in confirming_ that have asked (shim_confirm.h)
  // and forgets those that will not ask.
  void AnswerStartRequests();
  // How `shim` ended, once it has: its journal record, else what its status socket says,
  // else lost. `wait_status` is -1 for adopted shims.
  TaskExit Settle(const TaskKey& key, const Shim& shim, int wait_status);
  // A task whose shim died without recording its exit: kills what is left of it and
  // returns exit -1 with `reason`.
  TaskExit Lost(const TaskKey& key, const std::string& reason);
  // The task has ended: an exit by SIGKILL (137) that the agent did not ask for, in a
  // cgroup whose memory limit killed a process, gets the out-of-memory reason (journaled, so
  // a re-report says it too); then the cgroup goes, with whatever is left in it.
  void EndCgroup(const TaskKey& key, TaskExit* e, bool killed_by_agent);
  bool Exited(Shim& shim, int* wait_status);
  void Signal(const Shim& shim, int sig);
  void Wake();
  // REQUIRES: mu_ held. How long the thread may sleep: -1 = until woken.
  int WaitTimeoutMs() const;

  Clock& clock_;
  std::unique_ptr<Journal> journal_;  // reset (unlocked) by Stop, under mu_
  ShimSpawner spawner_;  // guarded by spawn_mu_
  std::shared_ptr<TaskCgroups> cgroups_;  // null when tasks get no cgroup
  ExitCallback on_exit_;
  std::mutex spawn_mu_;  // held by Launch throughout, and by Stop to set stop_
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: a new shim, a kill deadline or stop
  mutable std::mutex mu_;
  std::map<TaskKey, Shim> shims_;
  // Own shims that have not asked to start their task yet; their status sockets are in the
  // epoll set until they ask (or end): the thread answers while this agent lives.
  std::set<TaskKey> confirming_;
  // Exited shims whose exits the callback is handling: still in Running() until it returns,
  // so a registration composed meanwhile names them running or finished, never neither.
  std::set<TaskKey> settling_;
  bool stop_ = false;
  bool stopped_ = false;  // Stop has finished
  std::thread thread_;
};

}  // namespace gpusched::agent
