#pragma once
// TaskTable: every task the scheduler holds in memory, by id (issue 40), with the sets kept
// beside it: held submissions (admitted, not yet in Q), the active tasks (assigned or
// running) and those of them with a time limit, and the ids changed since the store last
// took them. It decides nothing; the scheduler changes the records it returns.
//
// Invariants (Scheduler::CheckInvariants checks the first against the records): `active()`
// holds exactly the tasks the scheduler marked active (SetActive), and `time_limited()` those
// of them whose spec has a time limit. Records live in a std::map: a pointer to one stays
// valid until the task is erased. Lookups by id go through a hash index of those pointers
// (issue 43): a release pass with a million tasks waiting looks each up three times, and the
// map's walk from its root was a third of that pass.
//
// Thread-safety: none (owned by the Scheduler, which is single-threaded).

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "core/task.h"

namespace gpusched::core {

class TaskTable {
 public:
  using Records = std::map<uint64_t, Task>;  // by id value, ascending

  // ---- records ----
  Task* Find(TaskId id) {
    auto it = index_.find(id.value());
    return it == index_.end() ? nullptr : it->second;
  }
  const Task* Find(TaskId id) const {
    auto it = index_.find(id.value());
    return it == index_.end() ? nullptr : it->second;
  }
  // REQUIRES: `id` is in the table (std::out_of_range otherwise).
  Task& At(TaskId id) { return *index_.at(id.value()); }
  const Task& At(TaskId id) const { return *index_.at(id.value()); }
  size_t size() const { return tasks_.size(); }
  const Records& records() const { return tasks_; }
  Records& records() { return tasks_; }

  // ---- ids ----
  // The id the next admitted task gets; every id below it was given out (or skipped).
  uint64_t next_id() const { return next_id_; }
  // Gives out the next id.
  TaskId TakeId() { return TaskId(next_id_++); }
  // The next id is at least `next`.
  void ReserveIdsBelow(uint64_t next) { next_id_ = std::max(next_id_, next); }

  // ---- membership ----
  // Adds a task with a fresh id from TakeId. REQUIRES: its id is not in the table.
  Task& Insert(Task task);
  // Adds a task read back from a store, keeping its id; ids must arrive in ascending order
  // (gaps allowed): InvalidArgument naming the id otherwise, and nothing changes.
  StatusOr<Task*> InsertRestored(const Task& task);
  // Removes the task (forgotten or withdrawn): TakeChanged no longer reports it. It leaves
  // held() too; REQUIRES: not active.
  void Erase(TaskId id);

  // ---- held submissions ----
  void Hold(TaskId id) { held_.insert(id); }
  // Whether `id` was held; it is not any more.
  bool Unhold(TaskId id) { return held_.erase(id) > 0; }
  bool IsHeld(TaskId id) const { return held_.count(id) > 0; }

  // ---- active tasks ----
  // The one setter of active() and time_limited(): `t` starts (true) or stops (false) being
  // assigned or running.
  void SetActive(const Task& t, bool active);
  const std::set<TaskId>& active() const { return active_; }
  const std::set<TaskId>& time_limited() const { return time_limited_; }

  // ---- changes (what the store must write) ----
  void MarkChanged(TaskId id) { changed_.push_back(id); }
  // Ids changed since the last call, ascending, once each, without the erased ones.
  std::vector<TaskId> TakeChanged();

 private:
  Records tasks_;
  std::unordered_map<uint64_t, Task*> index_;  // every record of tasks_, by id value
  std::set<TaskId> held_;
  uint64_t next_id_ = 1;
  std::set<TaskId> active_;        // assigned or running
  std::set<TaskId> time_limited_;  // the active ones with a time limit
  // Ids changed since TakeChanged, with repeats (a vector: a pass of the lazy flush may mark
  // thousands, and a set's insert per id was a fifth of a long replay).
  std::vector<TaskId> changed_;
  std::vector<TaskId> gone_since_take_;  // erased since TakeChanged
};

}  // namespace gpusched::core
