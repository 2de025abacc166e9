#pragma once
// TeamLedger: the scheduler's accounts per team (issues 11, 36, 40): the teams' quotas
// (core/quota.h), the GPUs and GPU memory each team holds now, and the priority classes a
// team may use (SchedulerConfig::priority_grants, a quota's max_priority). The scheduler
// tells it what is placed and released; the pass reads the quotas and the usage to classify
// tasks.
//
// Thread-safety: none (owned by the Scheduler, which is single-threaded).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/quota.h"
#include "core/scheduler_config.h"
#include "core/task.h"

namespace gpusched::core {

// A team's quota and what it holds and waits for (gpusched quota ls).
struct TeamStatus {
  TeamQuota quota;         // the implicit one (guarantee 0, unlimited borrow) when !has_quota
  bool has_quota = false;
  TeamUsage used;          // assigned or running tasks
  int64_t borrowed_gpus = 0;  // max(0, used GPUs - guaranteed GPUs)
  int64_t pending = 0;     // tasks in Q or FQ
};

class TeamLedger {
 public:
  // `config` (its priority classes and grants) must outlive the ledger.
  explicit TeamLedger(const SchedulerConfig& config) : config_(config) {}
  TeamLedger(const TeamLedger&) = delete;
  TeamLedger& operator=(const TeamLedger&) = delete;

  // ---- quotas ----
  // Sets or replaces a team's quota. Field-named errors (a max_priority that is not a
  // priority class names the known ones); nothing changes on error.
  Status SetQuota(const TeamQuota& quota);
  // The team goes back to the implicit quota (guarantee 0, unlimited borrowing).
  void RemoveQuota(const std::string& team) { quotas_.Remove(team); }
  const QuotaPolicy& quotas() const { return quotas_; }

  // ---- usage ----
  // A task of `team` placed (sign +1) or released (-1) at `p` and, for a gang, `gang` (its
  // other ranks): its GPUs, their memory and one task.
  void CountUsage(const std::string& team, const Placement& p,
                  const std::vector<Placement>& gang, int sign);
  // The team appears in usage() (zero if idle): a pass looked up its quota class.
  void Touch(const std::string& team) { usage_.try_emplace(team); }
  // GPUs and memory held per team (assigned or running tasks).
  const std::map<std::string, TeamUsage>& usage() const { return usage_; }
  // Every team with a quota, a task held (usage) or pending (`pending`: tasks per team in Q
  // or FQ), by name.
  std::map<std::string, TeamStatus> Teams(const std::map<std::string, int64_t>& pending) const;

  // ---- priority grants (issue 36) ----
  // The highest class `team` may use ("" team = "default"): its quota's max_priority, else
  // its grant, else the default grant, else the default class.
  std::string GrantedClass(const std::string& team) const;
  // PermissionDenied naming the class and the grant when the spec's class is above its
  // team's grant (and grants are enforced); OK otherwise. REQUIRES: a known class.
  Status CheckPriorityGrant(const TaskSpec& spec) const;
  // The priority value a task of `team` with `priority` preempts with: its own, capped at
  // its team's grant now when grants are enforced.
  int64_t PreemptingPriority(int64_t priority, const std::string& team) const;

 private:
  const SchedulerConfig& config_;
  QuotaPolicy quotas_;
  std::map<std::string, TeamUsage> usage_;
};

}  // namespace gpusched::core
