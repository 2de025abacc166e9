#pragma once
// Accounting: GPU-hours and GPU-memory-hours per user or team, from the tasks' run intervals
// (a transition into `running` up to the next transition out of it, or `now` while it runs).
//
// A GPU-hour is one whole GPU for one hour: a task holding `m` MiB of a GPU of `t` MiB counts
// m/t of it (a whole-GPU task holds all of it), so the tasks sharing a GPU (CN109992422A) add
// up to at most that GPU. GPU-memory-hours are GiB reserved x hours.
//
// Limits of what a task records: the GPUs and shares are those of its latest placement, so
// the intervals of earlier attempts are counted with them too. TaskOwner is the one place
// that says whose a task is: its recorded user and team (set by the server from the caller's
// token), "default" for either when the task records none.
//
// Issue 38: archived tasks are counted from rollup rows (store::RollupRow, written by
// ControlPlane::ArchiveHistory from the same TaskUsage), which keep per UTC hour what the
// tasks used. Within an hour, a row's use is taken as spread evenly over the hour: a window or
// step that cuts an hour gets the hour's use times the part of the hour it covers. Windows and
// steps aligned to whole hours give exactly what the tasks would have given; others may move
// use between neighbouring steps within an hour. A row's tasks count where its hour overlaps
// the window (a task counts in the hour its last run ended: a window holding only the start
// of an archived task's run counts its use but not the task). A run longer than
// kMaxRollupDays (32) days (server/rollups.h) keeps its older hours in its first kept hour.
//
// Pure: no clock, no I/O. Deterministic: groups by name, series by time.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gpusched/v1/gpusched.pb.h"
#include "server/task_usage.h"
#include "store/state_store.h"

namespace gpusched::server {

TaskOwner OwnerOf(const v1::Task& t);

// Issue 38: what `t` held and when (its owner as OwnerOf says).
TaskUsage UsageOf(const v1::Task& t, const GpuTotals& gpu_total_mib, int64_t now_ms);

struct AccountingQuery {
  // kTeamUser: one group per (team, user) pair, named "team/user". kFailure: one per
  // Task.failure (issue 41), "none" for tasks that succeeded or have not ended.
  enum class By { kUser, kTeam, kTeamUser, kFailure } by = By::kTeam;
  int64_t since_ms = 0, until_ms = 0, step_ms = 0;  // REQUIRES: since < until, step > 0
  int64_t now_ms = 0;                                // the end of intervals still open
  std::string user, team;                            // "" = everyone
};

struct AccountingGroup {
  std::string name;
  std::string team, user;  // kTeamUser: both; kTeam: team; kUser: user; kFailure: none
  double gpu_hours = 0, gpu_mem_gib_hours = 0;
  int64_t tasks = 0;                 // tasks that ran inside the window
  std::vector<double> gpu_hours_by_step;  // one per step from since_ms
};

class Accounting {
 public:
  // `gpu_total_mib`: (node, gpu index) -> the GPU's memory; a GPU not there counts whole.
  Accounting(AccountingQuery q, GpuTotals gpu_total_mib);
  // REQUIRES: `t` has its history (with_history).
  void Add(const v1::Task& t);
  // Issue 38: the archived tasks a rollup row counts, spread evenly within each hour.
  void AddRollup(const store::RollupRow& row);
  size_t steps() const { return steps_; }
  // Groups by name.
  std::vector<AccountingGroup> Groups() const;

 private:
  void AddInterval(AccountingGroup& g, int64_t from, int64_t to, double gpus, double gib);
  // The query's filters: whether a task of this owner counts.
  bool Wanted(const TaskOwner& owner) const;
  AccountingGroup& GroupOf(const TaskOwner& owner, const std::string& failure);

  AccountingQuery q_;
  GpuTotals gpu_total_mib_;
  size_t steps_ = 0;
  std::map<std::string, AccountingGroup> groups_;
};

class ControlPlane;
// Runs `acct` over every stored task that may have run inside the window, the rollup rows of
// the days the window touches, and the archived tasks (issue 38: history_retention) that
// finished inside it and are not in the rows (archived by a version before rollups), each
// task once (REST
// /api/v1/accounting and gpusched acct). REQUIRES: q.since_ms < q.until_ms, q.step_ms > 0.
StatusOr<std::vector<AccountingGroup>> CollectAccounting(ControlPlane& cp, Accounting& acct,
                                                         const AccountingQuery& q);
// The same into several Accountings of one window and filters (their groupings differ), in
// one pass over the tasks.
Status CollectAccountingInto(ControlPlane& cp, const std::vector<Accounting*>& accts,
                             const AccountingQuery& q);

}  // namespace gpusched::server
