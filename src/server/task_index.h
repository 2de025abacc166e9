#pragma once
// TaskIndex: the control plane's index of the tasks it holds in memory (live and retained
// finished ones) by state, its O(states) counts (which also count the finished tasks that left
// memory), and the retention order of finished tasks (issue 40: split out of ControlPlane).
//
// Retention: finished tasks leave memory oldest first, once more than `keep` are held or one
// finished more than `keep_ms` ago (monotonic time), and only when the control plane says the
// task may go (its last record durable): the first that may not stops the sweep, so the order
// stays the finish order.
//
// Thread-safety: none (the control plane's mutex guards it).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/clock.h"
#include "core/task.h"

namespace gpusched::server {

class TaskIndex {
 public:
  // Records task `id` in `state`: a change of state moves it; entering a terminal state puts
  // it at the end of the retention order, finished at `now` (monotonic).
  void Put(uint64_t id, core::TaskState state, TimeMs now);
  // Drops `id` from the index. `left_finished`: it left memory finished, and is counted so.
  void Remove(uint64_t id, bool left_finished);
  // The ids in `state`, ascending.
  const std::set<uint64_t>& InState(core::TaskState state) const;
  // Finished tasks that were never in memory (a restart restores live tasks only).
  void AddLeftFinished(const std::string& state_name, int64_t count);
  // Tasks per state name: those in memory and those that left it finished.
  std::map<std::string, int64_t> CountsByState() const;

  enum class Retire {
    kGone,     // not finished (it ran again) or not held: leaves the order
    kWait,     // may not leave yet: the sweep stops
    kRetired,  // left memory (the caller called Remove)
  };
  // Offers the finished tasks due to leave, oldest first, to `retire`.
  void ApplyRetention(TimeMs now, int64_t keep, DurationMs keep_ms,
                      const std::function<Retire(uint64_t id)>& retire);

 private:
  std::map<core::TaskState, std::set<uint64_t>> by_state_;
  std::unordered_map<uint64_t, core::TaskState> state_of_;
  std::map<std::string, int64_t> left_finished_;
  std::deque<std::pair<TimeMs, uint64_t>> finished_order_;  // (finished at, id)
};

}  // namespace gpusched::server
