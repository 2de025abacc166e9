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
// Pure: no clock, no I/O. Deterministic: groups by name, series by time.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::server {

struct TaskOwner {
  std::string user, team;
};
TaskOwner OwnerOf(const v1::Task& t);

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
  Accounting(AccountingQuery q, std::map<std::pair<std::string, int>, int64_t> gpu_total_mib);
  // REQUIRES: `t` has its history (with_history).
  void Add(const v1::Task& t);
  size_t steps() const { return steps_; }
  // Groups by name.
  std::vector<AccountingGroup> Groups() const;

 private:
  void AddInterval(AccountingGroup& g, int64_t from, int64_t to, double gpus, double gib);

  AccountingQuery q_;
  std::map<std::pair<std::string, int>, int64_t> gpu_total_mib_;
  size_t steps_ = 0;
  std::map<std::string, AccountingGroup> groups_;
};

class ControlPlane;
// Runs `acct` over every stored task that may have run inside the window, and over the
// archived ones (issue 38: history_retention) that finished inside it, each task once (REST
// /api/v1/accounting and gpusched acct). REQUIRES: q.since_ms < q.until_ms, q.step_ms > 0.
StatusOr<std::vector<AccountingGroup>> CollectAccounting(ControlPlane& cp, Accounting& acct,
                                                         const AccountingQuery& q);
// The same into several Accountings of one window and filters (their groupings differ), in
// one pass over the tasks.
Status CollectAccountingInto(ControlPlane& cp, const std::vector<Accounting*>& accts,
                             const AccountingQuery& q);

}  // namespace gpusched::server
