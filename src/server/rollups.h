#pragma once
// Issue 38: the archived tasks' usage as rollup rows (store::RollupRow), so that `acct` reads
// history from rows per UTC day and (team, user, failure) instead of from every task ever run.
//
// RollupSet adds tasks' usage (server/accounting.h UsageOf, the reading accounting itself
// makes) into rows, hour by hour: an hour slot gets each run's GPU share x the milliseconds it
// overlaps the hour (micro-GPU-ms, rounded per task and hour), its MiB x those milliseconds, and
// a task is counted once, in the hour its last run ended. A task's rows are bounded: it
// touches at most `max_days` days (kMaxRollupDays, or fewer for a store whose commits take
// fewer operations: RollupDaysFor), the last ones its runs touch; what ran before them is
// added to the first kept day's hour 0 (its totals stay whole; only where it ran moves), so one
// task's rows always fit one store commit (32 rows: 32 operations of etcd's 128).
//
// Pure: no clock, no I/O. Not thread-safe (one archiving round uses one).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "server/task_usage.h"
#include "store/state_store.h"

namespace gpusched::server {

inline constexpr int64_t kMaxRollupDays = 32;
// The day rows one task may touch in a store whose commits take `max_ops` operations: 32, less
// where that would not leave 8 operations for the task's own deletes (a record, its state
// entry, idempotency keys with theirs); at least 1.
int64_t RollupDaysFor(size_t max_ops);

// UTC days since the epoch of a wall-clock time in ms (floor).
int64_t RollupDayOf(int64_t ms);

class RollupSet {
 public:
  explicit RollupSet(int64_t max_days = kMaxRollupDays) : max_days_(max_days) {}
  // The days [first, last] whose rows `u` changes; {0, -1} (none) for a task that held
  // nothing or never ran. last - first < max_days.
  std::pair<int64_t, int64_t> DaysOf(const TaskUsage& u) const;
  // Rows as stored, to add to. REQUIRES: every row of the days of the tasks added next (rows
  // not given start at zero and would replace what the store holds).
  void Load(const std::vector<store::RollupRow>& rows);
  void Add(const TaskUsage& u);
  // The rows Add changed, in key order.
  std::vector<store::RollupRow> Changed() const;

 private:
  using Key = std::tuple<int64_t, std::string, std::string, std::string>;
  store::RollupRow& RowOf(int64_t day, const TaskUsage& u);
  // Adds [from, to) at `u`'s rate into the hours it covers.
  void AddSpan(const TaskUsage& u, int64_t from, int64_t to);

  int64_t max_days_;
  std::map<Key, store::RollupRow> rows_;
  std::set<Key> changed_;
};

}  // namespace gpusched::server
