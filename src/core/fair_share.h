#pragma once
// Fair share (issue 11): a factor per team, and per user inside a team, from usage decayed
// with a half-life, combined with the CN115981827A priority into the order of Q.
//
// Usage is GPU-milliseconds (a task's GPU count times the time it held them), decayed
// continuously: a charge of u at time t counts u * 2^(-(now - t) / half_life) at `now`
// (half_life 0 = no decay). The factor of a group among its siblings (teams among all teams,
// users among the users of one team) follows Slurm's classic fair share:
//
//   F = 2^(-U/S)   U = the group's decayed usage / its siblings' total (0 when they used
//                  nothing), S = the group's shares / its siblings' total shares
//
// so F = 1 for no usage, 0.5 when usage equals the share, towards 0 above it. A task's factor
// is F(team) * F(user in team). Shares [choice]: a team with a quota has its guaranteed GPUs
// as shares (at least 1), a team without one has 1; users of one team share equally.
//
// The order of Q (FairShareOptions::Rank): higher P goes first, ties by Pt, first submission
// and task id (QueueKey), where
//
//   P = priority_weight * (max_pt - Pt) / (max_pt - 1) + fair_share_weight * F
//
// With one team and one user (no authentication: every task is team "default", user ""), F is
// the same for every task, so the order is exactly CN115981827A claim 2's (Pt, seq).
//
// Thread-safety: none (owned by the Scheduler).

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::core {

struct FairShareOptions {
  // 0 = fair share off: Q in (Pt, first submission) exactly (CN115981827A claim 2).
  double fair_share_weight = 1000;
  double priority_weight = 1000;
  DurationMs half_life_ms = 7 * 86'400'000LL;  // Slurm's PriorityDecayHalfLife default
  // How often the factors are recomputed and Q re-ordered (Slurm's PriorityCalcPeriod).
  DurationMs recalc_ms = 300'000;

  bool enabled() const { return fair_share_weight > 0; }
  Status Validate() const;
};

// 2^(-usage_norm / share_norm); 0 when share_norm <= 0 and usage_norm > 0, 1 without usage.
double FairShareFactor(double usage_norm, double share_norm);

// The rank of a task in Q (lower goes first): -P scaled to an integer, see above.
int64_t FairShareRank(const FairShareOptions& o, int pt, int max_pt, double factor);

class FairShareUsage {
 public:
  explicit FairShareUsage(DurationMs half_life_ms) : half_life_ms_(half_life_ms) {}
  // Adds `gpu_ms` of use by (team, user) at `at_ms`.
  void Charge(const std::string& team, const std::string& user, double gpu_ms, TimeMs at_ms);
  // Usage from before this process (stored task records): decayed like a charge, but not
  // added to team_totals(), which count what this server saw.
  void Restore(const std::string& team, const std::string& user, double gpu_ms, TimeMs at_ms);
  // Decayed usage at `now_ms`.
  double Team(const std::string& team, TimeMs now_ms) const;
  double User(const std::string& team, const std::string& user, TimeMs now_ms) const;
  double Total(TimeMs now_ms) const;
  // Every team and (team, user) charged so far.
  const std::map<std::string, std::map<std::string, int>>& users_by_team() const {
    return users_by_team_;
  }
  // Undecayed GPU-ms per team since the start (for counters).
  const std::map<std::string, double>& team_totals() const { return team_totals_; }

 private:
  struct Decayed {
    double value = 0;
    TimeMs at_ms = 0;
  };
  double At(const Decayed& d, TimeMs now_ms) const;
  void Add(Decayed& d, double v, TimeMs at_ms) const;

  DurationMs half_life_ms_;
  Decayed total_;
  std::map<std::string, Decayed> teams_;
  std::map<std::pair<std::string, std::string>, Decayed> users_;
  std::map<std::string, std::map<std::string, int>> users_by_team_;
  std::map<std::string, double> team_totals_;
};

}  // namespace gpusched::core
