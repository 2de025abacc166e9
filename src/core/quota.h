#pragma once
// Team quotas with borrowing (issue 11), as a pure policy over values: per team, guaranteed
// GPUs (and optionally guaranteed GPU memory) and a borrowing limit.
//
//   within guarantee  the team's GPUs in use plus the task's fit in its guaranteed GPUs (and,
//                     when a memory guarantee is set, the same for GPU memory). Such a task is
//                     always tried before any task that would make its team borrow, and may
//                     reclaim GPUs that other teams borrow (Scheduler::Schedule).
//   borrowing         beyond the guarantee but within guarantee + borrow limit: placed only on
//                     capacity left idle after every within-guarantee task was tried.
//   over limit        past guarantee + borrow limit: waits in Q, not a placement failure.
//
// [choice] A team with no quota has guarantee 0 and an unlimited borrow limit: it runs on idle
// capacity only and its tasks are the first reclaimed. An empty team name is the team
// "default" (a server without authentication). A task's GPUs are counted whole: a share of a
// GPU (CN109992422A claim 2) counts as one GPU, its memory as its share.
//
// Thread-safety: none (owned by the Scheduler, which is single-threaded).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/units.h"
#include "core/task.h"

namespace gpusched::core {

inline constexpr char kDefaultTeam[] = "default";
inline constexpr int64_t kUnlimitedBorrow = -1;

// The team a task counts against: its spec's team, "" = "default".
std::string TeamOf(const TaskSpec& spec);

struct TeamQuota {
  std::string team;
  int64_t guaranteed_gpus = 0;
  MiB guaranteed_gpu_mem_mib = 0;  // 0 = no memory guarantee (GPUs alone decide)
  int64_t borrow_gpus = 0;         // GPUs beyond the guarantee; kUnlimitedBorrow = no limit
  // The highest priority class the team may submit (issue 36; `quota set --max-priority`):
  // "" = no grant of its own (SchedulerConfig::priority_grants decides). Checked against the
  // configured classes by the Scheduler, which knows them.
  std::string max_priority;

  // Field-named errors: team empty or with spaces, negative values.
  Status Validate() const;
  // Whether the quota limits anything: false for a quota that only grants a priority class
  // (guarantee 0, unlimited borrowing: what a team without a quota has).
  bool Limits() const;
  bool operator==(const TeamQuota&) const = default;
};

// What a team holds now: its assigned or running tasks.
// A GPU count as typed for a quota ("8"; with `allow_unlimited`, also "unlimited" =
// kUnlimitedBorrow). Errors name `field` and the value: `--borrow: "x" is not ...`.
StatusOr<int64_t> ParseGpuCount(std::string_view text, std::string_view field,
                                bool allow_unlimited);

// "TEAM=GPUS[:BORROW]" (BORROW a count or "unlimited"; absent = 0), as `gpusched sim --quota`
// takes it. Errors name the flag and the value.
StatusOr<TeamQuota> ParseTeamQuota(std::string_view text);

struct TeamUsage {
  int64_t gpus = 0;
  MiB gpu_mem_mib = 0;
  int64_t tasks = 0;
};

enum class QuotaClass { kWithinGuarantee, kBorrowing, kOverLimit };

class QuotaPolicy {
 public:
  // Replaces the team's quota. Field-named errors for bad values.
  Status Set(const TeamQuota& quota);
  // The team has no quota any more (absent: nothing changes).
  void Remove(const std::string& team);
  // No quota limits anything (none set, or only grants of priority classes): passes are
  // exactly what they were before quotas.
  bool empty() const { return limiting_ == 0; }
  const std::map<std::string, TeamQuota>& quotas() const { return quotas_; }
  // The team's quota, or the implicit one of a team without quota (guarantee 0, unlimited).
  TeamQuota Of(const std::string& team) const;

  // How a task of `gpus` GPUs and `gpu_mem_mib` MiB in all would stand if placed now.
  QuotaClass Classify(const std::string& team, const TeamUsage& used, int64_t gpus,
                      MiB gpu_mem_mib = 0) const;
  // The team uses more GPUs (or GPU memory, when guaranteed) than its guarantee.
  bool IsBorrowing(const std::string& team, const TeamUsage& used) const;
  // "team b is at its limit: 6 GPUs in use, guarantee 2 + borrow 4"
  std::string DescribeLimit(const std::string& team, const TeamUsage& used) const;

 private:
  std::map<std::string, TeamQuota> quotas_;
  int64_t limiting_ = 0;  // quotas_ entries whose Limits() is true
};

}  // namespace gpusched::core
