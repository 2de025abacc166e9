#pragma once
// FairShareBook: the scheduler's fair-share books (core/fair_share.h, issue 11). It keeps the
// decayed usage per team and user, charges the active tasks for the GPUs they hold, knows which
// (team, user) groups take part (those with usage, a quota or a live task) and caches the
// factors Q was last ordered by. The scheduler tells it what happens to tasks (live, charging,
// stopped) and re-keys Q after a recalculation; this class decides no order itself.
//
// Shares follow the teams' guarantees, read from the QuotaPolicy it is given at each
// computation. Time only from the Clock it is given.
//
// Thread-safety: none (owned by the Scheduler, which is single-threaded).

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "base/clock.h"
#include "base/ids.h"
#include "core/fair_share.h"
#include "core/quota.h"

namespace gpusched::core {

class FairShareBook {
 public:
  // `quotas` and `clock` must outlive the book. The first recalculation is due
  // options.recalc_ms from now.
  FairShareBook(const FairShareOptions& options, const QuotaPolicy& quotas, const Clock& clock);
  FairShareBook(const FairShareBook&) = delete;
  FairShareBook& operator=(const FairShareBook&) = delete;

  // ---- who takes part ----
  // A non-terminal task of (team, user) appeared (+1) or ended or left (-1).
  void CountLive(const std::string& team, const std::string& user, int delta);
  // Usage recorded before this scheduler started: `gpus` GPUs for `service_ms`, ending at
  // `at_ms` (nothing for gpus <= 0 or service_ms <= 0). Counted by the factors, not by
  // TeamGpuMs.
  void RestoreUsage(const std::string& team, const std::string& user, int64_t gpus,
                    DurationMs service_ms, TimeMs at_ms);
  // Shares or the known groups changed: the next pass recomputes (RecalcDue).
  void MarkDirty() { dirty_ = true; }

  // ---- charging the active tasks ----
  // Task `id` of (team, user) holds `gpus` GPUs from `at_ms`: charged from then on.
  void StartCharging(TaskId id, const std::string& team, const std::string& user, double gpus,
                     TimeMs at_ms);
  // Charges task `id` up to `until_ms` (never twice for the same time) and stops charging it.
  // A task not being charged: nothing.
  void StopCharging(TaskId id, TimeMs until_ms);

  // ---- factors ----
  // The factor F(team) * F(user) as of the last Recalc; 1.0 for a group unknown then, which
  // makes a recalculation due.
  double CachedFactor(std::string_view team, std::string_view user) const;
  // A group appeared or shares changed since the last Recalc, or recalc_ms passed.
  bool RecalcDue(TimeMs now) const { return dirty_ || now >= next_recalc_ms_; }
  // Charges every active task up to now (ascending id) and recomputes the factor of every
  // known group; the next one is due recalc_ms from now.
  void Recalc();
  // F(team) * F(user) now, computed afresh (not the cached one).
  double FactorOf(const std::string& team, const std::string& user) const;

  // ---- counters ----
  // GPU-ms used per team since this book started (active tasks up to now), undecayed.
  std::map<std::string, double> TeamGpuMs() const;
  const FairShareUsage& usage() const { return usage_; }

 private:
  // Every team with a quota, usage or a live task, and its users with usage or a live task.
  using Groups = std::map<std::string, std::set<std::string>>;
  Groups KnownGroups() const;
  double FactorAmong(const Groups& groups, const std::string& team,
                     const std::string& user) const;
  struct Charging {
    std::string team, user;
    double gpus = 0;
    TimeMs until_ms = 0;  // charged up to
  };
  void Charge(Charging& c, TimeMs until_ms);

  const FairShareOptions options_;
  const QuotaPolicy& quotas_;
  const Clock& clock_;
  FairShareUsage usage_;
  std::map<TaskId, Charging> charging_;  // the active tasks, by id
  // (team, user) ordered as the strings are, found by views (no copy per lookup: Q's keys
  // read a factor per task and pass).
  struct GroupLess {
    using is_transparent = void;
    using View = std::pair<std::string_view, std::string_view>;
    static View AsView(const std::pair<std::string, std::string>& p) { return {p.first, p.second}; }
    static View AsView(const View& v) { return v; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return AsView(a) < AsView(b);
    }
  };
  // As of the last Recalc.
  std::map<std::pair<std::string, std::string>, double, GroupLess> factors_;
  TimeMs next_recalc_ms_ = 0;
  mutable bool dirty_ = false;  // a new team or user appeared, or shares changed
  // Non-terminal tasks per (team, user): who takes part, without a scan of the tasks.
  std::map<std::pair<std::string, std::string>, int64_t> live_;
};

}  // namespace gpusched::core
