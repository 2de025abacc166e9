#pragma once
// MemoryWatchdog: the backstop of GPU-memory shares. The preload library (src/preload)
// refuses allocations past a task's share, but a task can get around it (a static binary,
// memory the driver allocates for it); the agent therefore also reads what each task's
// processes hold per GPU (NVML's per-process accounting) and stops a task that stays above
// its share on any of its GPUs for the grace period, with the reason "exceeded its GPU
// memory share". Pure: the agent passes the readings and the time.
//
// Thread-safety: none (the agent's heartbeat thread owns it).

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/task_executor.h"
#include "base/clock.h"
#include "base/units.h"

namespace gpusched::agent {

struct TaskShare {
  std::vector<int> gpus;       // device indices on the node
  std::vector<MiB> share_mib;  // the task's share of each (same order); 0 = not limited
};

struct WatchdogStop {
  TaskKey task;
  std::string reason;  // "exceeded its GPU memory share: 700 MiB of 500 MiB on GPU 0 for 30s"
};

class MemoryWatchdog {
 public:
  explicit MemoryWatchdog(DurationMs grace_ms) : grace_ms_(grace_ms) {}

  // `used`: per task, per GPU index, what its processes hold now. Returns the tasks to stop
  // now, each once, in key order.
  std::vector<WatchdogStop> Observe(const std::map<TaskKey, TaskShare>& tasks,
                                    const std::map<TaskKey, std::map<int, MiB>>& used,
                                    TimeMs now);

 private:
  DurationMs grace_ms_;
  std::map<TaskKey, TimeMs> over_since_;
  std::set<TaskKey> stopped_;
};

}  // namespace gpusched::agent
