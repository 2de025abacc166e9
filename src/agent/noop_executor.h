#pragma once
// NoopExecutor: runs nothing. A launched task is "running" (listed by Running, so the
// agent's heartbeats carry it) for its spec's duration_ms, then exits with code 0; Kill
// ends it at once with exit code 137 and "killed: <reason>". For benchmarks and soaks of
// the control plane (`--executor noop`), where starting processes would be the bottleneck.
//
// One timer thread over a min-heap of deadlines, no thread per task: thousands of tasks per
// second. Time comes from the Clock, so a FakeClock drives it in tests (the thread waits
// through Clock::WaitFor). Nothing is journaled: its tasks and unacknowledged exits do not
// outlive the executor (a restarted agent does not list them, and the server re-places
// them).
//
// Thread-safety: all public methods may be called from any thread.

#include <condition_variable>
#include <map>
#include <set>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "agent/task_executor.h"

namespace gpusched::agent {

class NoopExecutor final : public TaskExecutor {
 public:
  NoopExecutor(Clock& clock, ExitCallback on_exit);
  ~NoopExecutor() override;  // Stop

  Status Launch(const LaunchSpec& spec) override;
  // The exit (137) is reported from the timer thread, not from the caller's.
  void Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
            const std::string& reason) override;
  std::vector<TaskKey> Running() const override;
  void Acknowledge(uint64_t, int64_t) override {}  // nothing is kept
  // Both modes drop the running tasks without reporting them.
  void Stop(ShutdownMode mode) override;

 private:
  struct Deadline {
    TimeMs at_ms;
    uint64_t seq;  // the task's current deadline; a stale one (after Kill) is skipped
    TaskKey key;
    bool operator>(const Deadline& o) const {
      return at_ms != o.at_ms ? at_ms > o.at_ms : seq > o.seq;
    }
  };
  struct Task {
    uint64_t seq = 0;
    bool killed = false;
    TaskExit exit;  // what is reported when the deadline passes
  };
  // REQUIRES: mu_ held. Schedules `task`'s exit at `at_ms`. True when it is the earliest
  // deadline: the caller then notifies cv_, after unlocking mu_.
  bool Schedule(const TaskKey& key, Task& task, TimeMs at_ms);
  void Loop();

  Clock& clock_;
  ExitCallback on_exit_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<TaskKey, Task> running_;
  // Ended, their exits with the callback: still in Running() until it returns, so a
  // registration composed meanwhile names them running or finished, never neither.
  std::set<TaskKey> settling_;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  uint64_t next_seq_ = 0;
  uint64_t generation_ = 0;  // bumped when the earliest deadline moves or on stop
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpusched::agent
